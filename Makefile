# cumembench - the front door. Everything real happens in CMake and the
# cumembench binary; these targets set up, build and run.
#
#   make bench   [PRESET=quick|full] [ARGS="--scenario churn ..."] [OUT=dir]
#   make test
#
BUILD      ?= build
PRESET     ?= quick
JOBS       ?= $(shell nproc)
ARGS       ?=
OUT        ?=
CUDA_ARCHS ?=
NVCC       ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)

CMAKE_FLAGS = -DCMAKE_CUDA_COMPILER=$(NVCC) $(if $(CUDA_ARCHS),-DCMAKE_CUDA_ARCHITECTURES="$(CUDA_ARCHS)")

.PHONY: all deps build bench test clean

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

clean:
	rm -rf $(BUILD)
