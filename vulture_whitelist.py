"""Names vulture (``make lint``, 60 % confidence) reports unused that are used where it cannot see:
looked up by name, called from Java, read by pydantic or llama.cpp, or public API that only the
tests call. One line a name, saying why. vulture reads this file beside oamd/ and conformance/;
nothing imports it. A name that is really unused is deleted, not added here."""

# ruff: noqa: B018 (each line is an attribute read: vulture counts it as a use of the name)

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# ---- looked up by name -------------------------------------------------------------------------
_._expect_response  # conformance/player.py: getattr(self, "_expect_" + step["expect"])
_._expect_events  # conformance/player.py: as above
_._expect_tool_calls  # conformance/player.py: as above
_._expect_tool_cancels  # conformance/player.py: as above
_._expect_world_changed  # conformance/player.py: as above
_._expect_order  # conformance/player.py: as above
_._expect_count  # conformance/player.py: as above
_._expect_silence  # conformance/player.py: as above
_._expect_no_response  # conformance/player.py: as above
_._expect_exit  # conformance/player.py: as above
_._array  # oamd/agent/schema/_convert.py: getattr(self, "_" + kind) (agent/: see i23-layers)
_._string  # oamd/agent/schema/_convert.py: as above (agent/: see i23-layers)
_._integer  # oamd/agent/schema/_convert.py: as above (agent/: see i23-layers)
_.opened  # rpc.observe.ConnectionWatch's hook, called by report(watch, "opened", conn)
_.__getattr__  # oamd/client, oamd/rpc: a module's lazy names (PEP 562)
_.__dir__  # oamd/client: a module's names with the lazy ones (PEP 562)

# ---- called from Java (pyjnius proxies of android_host/'s interfaces) --------------------------
_.onProgress  # jvm.py: DownloadListener.onProgress
_.onCompleted  # jvm.py: DownloadListener.onCompleted
_.onChunk  # jvm.py: GenerationSink.onChunk
_.onDone  # jvm.py: GenerationSink.onDone

# ---- read by a library -------------------------------------------------------------------------
_._requires_eval  # _llama_scoring.py: llama_cpp.Llama reads it before its next evaluation
_.ftype  # llama_model_quantize_params, a ctypes struct llama.cpp's quantiser reads
_.allow_requantize  # as above
_.nthread  # as above
_.model_config  # client/_results.py: pydantic's configuration of WireModel
_.old_value  # client/_events.py, _game_results.py: pydantic fields, the wire's members
_.new_value  # client/_events.py: pydantic field
_.pending_operations  # client/_game_results.py, _results.py: pydantic field
_.unsubscribed  # client/_game_results.py: pydantic field
_.duration_seconds  # client/_results.py: pydantic field
_.total_tokens  # client/_results.py: pydantic field
_.streaming  # client/_results.py: pydantic field
_.client_tools  # client/_results.py: pydantic field
_.structured_output  # client/_results.py: pydantic field
_.protocol_version  # client/_results.py: pydantic field
_.generation_schema  # client/_results.py: pydantic field
_.rendered  # client/_results.py: pydantic field
_.replayed_lines  # recording/_replay.py: a ReplayOutcome field, filled positionally

# ---- public API the tree itself does not call (tests and hosts do) ------------------------------
_.stdio  # client Bridge.stdio (tests/test_client*.py, README)
_.validate_schema  # client Bridge.validate_schema (tests/test_client_typed_calls.py)
_.validate_tools  # client Bridge.validate_tools (tests/test_client_typed_calls.py)
_.on  # client Bridge.on (tests/test_client_events.py)
_.create_session  # client Bridge.create_session (tests, bench, evals)
_.create_npc  # client Bridge.create_npc (tests)
_.restore_npc  # client Bridge.restore_npc (tests)
_.create_world  # client Bridge.create_world (tests)
_.next_message  # client Client.next_message (tests/test_client.py, test_backend_openai.py)
_.events_for  # client Recorder.events_for (tests/conftest.py's recorder)
_.created_version  # client World.created_version (tests/test_client_bridge.py)
_.wait_until  # jvm.py DownloadProgress.wait_until (tests/test_android_jvm.py)
_.run_blocking  # jvm.py JvmRuntime.run_blocking (tests/android/jvm_support.py)
_.registered  # jvm.py JvmRuntime.registered (tests/test_android_jvm.py: no sink leaks)
_.late_calls  # jvm.py: a sink's calls after its terminal one (tests/test_android_jvm.py)
_.download_progress  # mlkit.py: the download availability started (tests/test_android_*.py)
