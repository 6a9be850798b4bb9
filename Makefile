# cumembench - the front door. Everything real happens in CMake and the
# cumembench binary; these targets set up, build and run.
#
#   make bench   [PRESET=quick|full] [ARGS="--scenario churn ..."] [OUT=dir]
#   make test
#   make baseline [MODE=sim|gpu]       the suite -> results/<gpu-slug>/baseline/
#   make regress  [MODE=sim|gpu] [BASELINE=dir] [CURRENT=dir] [COMPARE_ARGS="..."]
#                                      compare with the baseline (docs/regress.md)
#
BUILD      ?= build
PRESET     ?= quick
JOBS       ?= $(shell nproc)
ARGS       ?=
OUT        ?=
CUDA_ARCHS ?=
NVCC       ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
MODE       ?= sim
BASELINE   ?=
CURRENT    ?=
SUMMARY    ?=
COMPARE_ARGS ?=

CMAKE_FLAGS = -DCMAKE_CUDA_COMPILER=$(NVCC) $(if $(CUDA_ARCHS),-DCMAKE_CUDA_ARCHITECTURES="$(CUDA_ARCHS)")

.PHONY: all deps build bench test baseline regress clean

all: build

deps:
	@ci/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

bench: build
	$(BUILD)/cumembench --preset $(PRESET) $(if $(OUT),--out $(OUT)) $(ARGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

baseline: build
	@BIN=$(BUILD)/cumembench MODE=$(MODE) ci/baseline.sh

# With CURRENT given only the comparison runs (nothing is built). make's own
# exit status is 2 on any failure; ci/regress.sh and tools/cumembench-compare
# return 1 for a regression and 2 for unusable input.
regress: $(if $(CURRENT),,build)
	@BIN=$(BUILD)/cumembench MODE=$(MODE) BASELINE=$(BASELINE) CURRENT=$(CURRENT) SUMMARY=$(SUMMARY) \
		ci/regress.sh $(COMPARE_ARGS)

clean:
	rm -rf $(BUILD)
