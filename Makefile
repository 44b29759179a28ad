# The two commands a new user runs (README.md): `make run` and `make test`.
# Everything else here is a wrapper around scripts/ and CMake presets.
SHELL := /bin/bash
.DEFAULT_GOAL := build
BIN := build/release/llmtrain
JOBS ?= $(shell nproc)
# CI=true (set by the CI runner) turns warnings into errors.
WERROR := $(if $(CI),ON,OFF)
# "Configured" means CMake generated build.ninja, which it writes only when configure and generate
# both succeed. A CMakeCache.txt left by a failed or killed configure is not enough: the next make
# configures again instead of handing ninja a directory without build.ninja.
PRESET_BUILD := build/release/build.ninja
PRESET_CACHE := build/release/CMakeCache.txt

.PHONY: install setup build configure run test test-slow test-full test-asan fuzz data clean lint dup-check bench \
  image test-image test-fresh

setup:
	@bash scripts/setup.sh

$(PRESET_BUILD):
	cmake --preset release -DLLMTRAIN_WERROR=$(WERROR) >/dev/null

configure:
	cmake --preset release -DLLMTRAIN_WERROR=$(WERROR)

build: $(PRESET_BUILD)
	@if [ "$$(grep -c '^LLMTRAIN_WERROR:BOOL=$(WERROR)$$' $(PRESET_CACHE))" = 0 ]; then \
	  cmake --preset release -DLLMTRAIN_WERROR=$(WERROR) >/dev/null; fi
	cmake --build --preset release -j $(JOBS)
	@ln -sf build/release/compile_commands.json compile_commands.json

# The binary (only it is built, not the tests) in $(PREFIX)/bin and what it reads at run time in
# $(PREFIX)/share/llmtrain (cmake/Install.cmake); DESTDIR=/staging puts it under /staging$(PREFIX).
PREFIX ?= /usr/local
install: $(PRESET_BUILD)
	@if [ "$$(grep -c '^LLMTRAIN_WERROR:BOOL=$(WERROR)$$' $(PRESET_CACHE))" = 0 ]; then \
	  cmake --preset release -DLLMTRAIN_WERROR=$(WERROR) >/dev/null; fi
	cmake --build --preset release -j $(JOBS) --target llmtrain
	DESTDIR=$(DESTDIR) cmake --install build/release --prefix $(PREFIX)
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	  *) [ -n "$(DESTDIR)" ] || echo "note: $(PREFIX)/bin is not on PATH: export PATH=\"$(PREFIX)/bin:\$$PATH\"";; esac

# The main job: set up, build, prepare the default corpus, then the default preset.
run: setup build
	@bash scripts/run_main.sh

# Every test except the GPU ones, those that need the built image and the slow ones (labels unit, reference,
# integration).
test: setup build
	cd build/release && ctest --output-on-failure --label-exclude 'gpu|image|slow' -j $(JOBS) --timeout 900

# Whole training runs of real data sets (label slow): Fashion-MNIST to its accuracy through the server.
test-slow: setup build
	cd build/release && ctest --output-on-failure --label-regex slow -j 1 --timeout 3600

# What does not fit the 30-minute CI budget: sanitizers, longer fuzzing, the image and the tests in it,
# the README's two commands on a new Debian root, and (in test-slow) the control plane's 30-minute soak
# (tests/security/soak_test.cpp; SOAK_S seconds, default 1800: SOAK_S=150 tries it).
SOAK_S ?= 1800
test-full: export LLMTRAIN_SOAK_S = $(SOAK_S)
test-full: test test-slow test-asan fuzz test-image test-fresh

# `make run` and `make test` in a new Debian 12 root made by debootstrap (scripts/test_fresh.sh): the
# check that the setup installs everything. About 40 minutes on 2 cores with an empty compiler cache
# (.cache/fresh), 12 with a warm one (docs/benchmarks.md); run it before resolving any
# issue that changes dependencies. Needs root.
test-fresh: setup
	bash scripts/test_fresh.sh

# The tests labelled image (the two-pod Indexed Job with each pod in the built image under podman).
test-image: build image
	cd build/release && ctest -L image --output-on-failure

test-asan: setup
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	cd build/asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure --label-exclude 'gpu|reference|image' \
	  -j $(JOBS) --timeout 1800

# Every fuzz target FUZZ_SECONDS (default 10 minutes) in turn; FUZZ_TARGETS="a_fuzz b_fuzz" picks some.
FUZZ_SECONDS ?= 600
fuzz: setup
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)
	bash scripts/run_fuzzers.sh build/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The default corpus (scripts/make_corpus.sh, docs/data.md) and its GPT-2 shards, which the default
# preset trains on. Each step is skipped when its output is newer than its input.
CORPUS_DIR := data/corpus
CORPUS_SHARDS := data/shards/gpt2_corpus
CHAT_EXAMPLE := data/chat/corpus_qa.jsonl
data: build
	@$(MAKE) --no-print-directory $(CORPUS_SHARDS)/manifest.json $(CHAT_EXAMPLE)

$(CORPUS_DIR)/.complete: scripts/make_corpus.sh
	bash scripts/make_corpus.sh $(CORPUS_DIR)

$(CORPUS_SHARDS)/manifest.json: $(CORPUS_DIR)/.complete
	$(BIN) data prepare --input $(CORPUS_DIR)/bible $(CORPUS_DIR)/fortunes --format text --doc-separator % \
	  --tokenizer gpt2 --val-fraction 0.02 --seed 0 --out $(CORPUS_SHARDS)

# The chat fine-tuning example's conversations (docs/formats/chat_jsonl.md, "The example data").
$(CHAT_EXAMPLE): $(CORPUS_DIR)/.complete
	$(BIN) data chat-example --corpus $(CORPUS_DIR) --out $(CHAT_EXAMPLE) --conversations 3000 --seed 0

# The container image with podman (deploy/image/build.sh, docs/kubernetes.md): builds, reports the size,
# runs `llmtrain version` and a few training steps in it. Slow (minutes), so only in test-full.
image:
	bash deploy/image/build.sh

lint:
	git ls-files '*.cpp' '*.h' '*.cu' | xargs clang-format --dry-run -Werror

# Duplicated code in src/ and tests/ (tools/dup_check.py): fails when a pair merged behind shared helpers
# (its KEPT_APART list) is duplicated again, or when a file pair not in tools/dup_known.txt is. `make test`
# runs the same check as the ctest test build.dup_check.
dup-check:
	/usr/bin/python3 tools/dup_check.py --check

clean:
	rm -rf build compile_commands.json
