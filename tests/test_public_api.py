"""What outsiders may use is pinned: ``oamd.client`` (hosts) and ``oamd.backends.base`` (backend
plugins). A name added, renamed or dropped fails here first, so the change is made on purpose."""

from __future__ import annotations

import inspect
import subprocess
import sys

import oamd.backends.base
import oamd.client

CLIENT = [
    "Availability",
    "Bridge",
    "Capabilities",
    "Client",
    "ConnectionClosed",
    "ContentGenerateResult",
    "DecideManyResult",
    "Decision",
    "DecisionFailure",
    "DecisionRequest",
    "Emotion",
    "EmotionEvent",
    "ErrorData",
    "ErrorObject",
    "EventCallback",
    "InitializeResult",
    "LineDeltaEvent",
    "LineResetEvent",
    "ModelStepEvent",
    "NotificationCallback",
    "NotificationHandler",
    "Npc",
    "NpcCreateResult",
    "NpcEvent",
    "NpcEventNotification",
    "NpcListResult",
    "NpcSummary",
    "NpcTalkResult",
    "NpcUpdateResult",
    "PartialEvent",
    "Recorder",
    "RpcError",
    "SchemaValidateResult",
    "ServerInfo",
    "Session",
    "SessionAck",
    "SessionCompactResult",
    "SessionCreateResult",
    "SessionEvent",
    "SessionEventNotification",
    "SessionListResult",
    "SessionRespondResult",
    "SessionSummary",
    "Step",
    "Subscription",
    "TextCallback",
    "TextEvent",
    "ToolCall",
    "ToolCallCompletedEvent",
    "ToolCallRecord",
    "ToolCallStartedEvent",
    "ToolCancel",
    "ToolContext",
    "ToolError",
    "ToolFunction",
    "ToolHandler",
    "ToolsValidateResult",
    "Usage",
    "ValidatedTool",
    "World",
    "WorldChange",
    "WorldCreateResult",
    "WorldGetResult",
    "WorldListResult",
    "WorldRemoveResult",
    "WorldSetResult",
    "WorldSubscription",
    "WorldSummary",
    "WorldUnsubscribeResult",
    "connect_stdio",
    "connect_stream",
    "connect_tcp",
    "connect_unix",
]

BACKEND_PLUGIN = [
    "Availability",
    "ChatMessage",
    "GenerationEvent",
    "GenerationRequest",
    "LanguageModel",
    "ModelCapabilities",
    "ModelError",
    "Sampling",
    "ScoredText",
    "Scores",
    "TextDelta",
    "ToolCallRequest",
    "ToolSpec",
    "UnconfiguredModel",
    "Usage",
    "estimate_tokens",
]

LANGUAGE_MODEL_ABSTRACT = {"availability", "generate"}
"""What every backend must implement; the rest of ``LanguageModel`` has defaults."""

LANGUAGE_MODEL_OVERRIDABLE = {
    "aclose",
    "cached_availability",
    "count_tokens",
    "last_known_availability",
    "prefill",
    "score",
    "settle_capabilities",
}


def test_oamd_client_exports_exactly_the_pinned_names():
    assert oamd.client.__all__ == CLIENT


def test_every_name_oamd_client_exports_resolves():
    missing = [name for name in oamd.client.__all__ if not hasattr(oamd.client, name)]
    assert missing == []
    assert sorted(dir(oamd.client)) == CLIENT


def test_the_backend_plugin_surface_is_exactly_the_pinned_names():
    assert sorted(oamd.backends.base.__all__) == BACKEND_PLUGIN
    assert len(set(oamd.backends.base.__all__)) == len(oamd.backends.base.__all__)
    assert all(hasattr(oamd.backends.base, name) for name in BACKEND_PLUGIN)


def test_a_backend_implements_availability_and_generate_and_may_override_the_rest():
    model = oamd.backends.base.LanguageModel
    assert model.__abstractmethods__ == LANGUAGE_MODEL_ABSTRACT
    public = {
        name
        for name, _ in inspect.getmembers(model, callable)
        if not name.startswith("_") and name not in LANGUAGE_MODEL_ABSTRACT
    }
    assert public == LANGUAGE_MODEL_OVERRIDABLE


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )


def test_the_dict_level_client_does_not_load_pydantic():
    done = run_python(
        "import sys, oamd.client\n"
        "from oamd.client import Client, Recorder, connect_stdio\n"
        "print('pydantic' in sys.modules)\n"
    )
    assert done.stdout.strip() == "False", done.stderr


def test_the_typed_api_names_the_extra_it_needs_when_pydantic_is_missing():
    done = run_python(
        "import sys\n"
        "sys.modules['pydantic'] = None  # as if it were not installed\n"
        "from oamd.client import Client\n"
        "from oamd.client import Bridge\n"
    )
    assert done.returncode != 0
    assert (
        "ImportError: oamd.client.Bridge needs pydantic: pip install pydantic (the 'client' extra)"
        in (done.stderr)
    )
