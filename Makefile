# cumembench - the front door. Everything real happens in CMake and the
# cumembench binary; these targets set up, build and run.
#
#   make bench   [PRESET=quick|full] [ARGS="--scenario churn ..."] [OUT=dir] [GPUS=all|"0 1"]
#   make bench-scale [SCALE_OUT=dir] [MACHINE="..."]  the suite at scale: a table of events, seconds, peak RSS
#   make report  [RUNS="dir ..."] [REPORT=out.html]
#   make report-gpus [RUNS="dir ..."] the committed full runs of every GPU side by side
#                                      (results/<gpu-slug>/full; RUNS=all: every committed run)
#   make test
#   make docs  [CHECK=1]            regenerate the docs' generated blocks from committed
#                                      results (CHECK=1: only check them; CI does)
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
GPUS       ?=
RUNS       ?=
REPORT     ?=
PYTHON     ?= /usr/bin/python3
DEPS_FLAGS ?=

# make report: the newest run under results/runs/, else the committed ones
NEWEST_RUN     = $(shell ls -td results/runs/*/ 2>/dev/null | while read d; do [ -f "$$d/results.csv" ] && echo "$${d%/}" && break; done)
COMMITTED_RUNS = $(shell find results \( -name results.csv -o -name results.csv.gz \) -not -path 'results/runs/*' 2>/dev/null | xargs -r -n1 dirname | sort -u)

CMAKE_FLAGS = -DCMAKE_CUDA_COMPILER=$(NVCC) $(if $(CUDA_ARCHS),-DCMAKE_CUDA_ARCHITECTURES="$(CUDA_ARCHS)")

.PHONY: all deps build build-quiet bench report report-gpus test baseline regress clean docs docs-check

all: build

deps:
	@ci/install-deps.sh $(DEPS_FLAGS)

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# The suite (on every listed GPU with GPUS=), then its report; the exit
# status is the suite's.
# The same build, silent unless it fails (then its whole log): make regress
# shows the comparison, not the build's progress.
build-quiet: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@log=$$(cmake --build $(BUILD) -j$(JOBS) 2>&1) || { printf '%s\n' "$$log" >&2; exit 1; }

bench: build
	@GPUS="$(GPUS)" OUT="$(OUT)" REPORT="$(REPORT)" PYTHON="$(PYTHON)" ci/bench.sh $(BUILD) --preset $(PRESET) $(ARGS)

# The suite at scale (docs/explain.md): a 2-million-event snapshot, 10 million
# trace events, the explanation's cost, the report; the table in $(SCALE_OUT)/scale.md.
SCALE_OUT ?= results/runs/scale-$(shell date +%Y%m%d-%H%M%S)
.PHONY: bench-scale
bench-scale: build-quiet
	@scripts/bench-scale.sh $(BUILD) $(SCALE_OUT) $(MACHINE)

report:
	@runs="$(or $(RUNS),$(NEWEST_RUN),$(COMMITTED_RUNS))"; \
	if [ -z "$$runs" ]; then echo "make report: no results yet: run make bench, or give RUNS=\"dir ...\"" >&2; exit 2; fi; \
	set -- $$runs; out="$(REPORT)"; \
	if [ -z "$$out" ] && [ $$# -gt 1 ]; then out=results/runs/report-$$(date +%Y%m%d-%H%M%S).html; fi; \
	$(PYTHON) plots/report.py $${out:+-o "$$out"} $$runs

GPU_FULL_RUNS = $(shell find results -path 'results/*/full/results.csv*' 2>/dev/null | xargs -r -n1 dirname | sort -u)

report-gpus:
	@runs="$(if $(filter all,$(RUNS)),$(COMMITTED_RUNS),$(or $(RUNS),$(GPU_FULL_RUNS)))"; \
	[ -n "$$runs" ] || { echo "make report-gpus: no committed full runs under results/<gpu-slug>/full (RUNS=all takes every committed run)" >&2; exit 2; }; \
	$(MAKE) --no-print-directory report RUNS="$$runs" REPORT="$(or $(REPORT),results/runs/report-gpus.html)"

# The tests also need chromium (the report is checked in a headless browser).
test: DEPS_FLAGS = --test
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Every table in README.md and docs/ between <!-- BEGIN generated: CMD --> and
# <!-- END generated --> is CMD's output (tools/gendocs.py); some run build/cumembench.
docs: build-quiet
	@$(PYTHON) tools/gendocs.py $(if $(CHECK),--check)

docs-check:
	@$(MAKE) --no-print-directory docs CHECK=1

baseline: build-quiet
	@BIN=$(BUILD)/cumembench MODE=$(MODE) ci/baseline.sh

# With CURRENT given only the comparison runs (nothing is built). make's own
# exit status is 2 on any failure; ci/regress.sh and tools/cumembench-compare
# return 1 for a regression and 2 for unusable input.
regress: $(if $(CURRENT),,build-quiet)
	@BIN=$(BUILD)/cumembench MODE=$(MODE) BASELINE=$(BASELINE) CURRENT=$(CURRENT) SUMMARY=$(SUMMARY) \
		ci/regress.sh $(COMPARE_ARGS)

clean:
	rm -rf $(BUILD)
