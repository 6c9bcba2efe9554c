# The two commands of the README:
#   make run    bootstrap, build, run experiments/quickstart.lua
#   make test   bootstrap, build, run the test suite (ctest)
# Others: make test-gpu (the CUDA kernels against the CPU, on a GPU), make build, make bootstrap, make bench, make experiments (the study's experiments
# and grazzi-s5, into experiments/*/results/, about 2 hours on 2 cores), make test-sanitize (ASan/LSan/UBSan
# build of the binding tests, in build-sanitize/), make format, make clean.

BUILD ?= build
SANITIZE_BUILD ?= build-sanitize
TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=

.PHONY: all bootstrap build run test test-gpu test-sanitize bench experiments format clean

all: build

bootstrap:
	@scripts/bootstrap.sh

# Configure once; later builds re-run CMake by themselves when a CMakeLists.txt changes.
$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) \
	  -DMEMSCRIPT_TORCH_PYTHON="$$(scripts/bootstrap.sh --print-python)" \
	  -DMEMSCRIPT_LUA_SOURCE="$$(scripts/bootstrap.sh --print-lua)" $(CMAKE_ARGS)

build: bootstrap $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/memscript experiments/quickstart.lua

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Every mixer and CUDA kernel on a real GPU against the CPU (label gpu); says SKIPPED, loudly,
# where the build has no CUDA kernels or no GPU is usable.
test-gpu: build
	@if [ ! -x $(BUILD)/tests/memscript_gpu_tests ]; then \
	  echo "SKIPPED: this build has no CUDA kernels (no nvcc when it was configured): no gpu tests"; \
	else cd $(BUILD) && ctest --output-on-failure -L gpu $(CTEST_ARGS); fi

# Benchmarks (medians, side by side in one run); never part of the tests.
bench: build
	cmake --build $(BUILD) --target bench

# The experiments of experiments/ in full; each one's report is copied into its results/.
experiments: build
	MEMSCRIPT=$(BUILD)/memscript scripts/run-experiments.sh $(EXPERIMENTS)

$(SANITIZE_BUILD)/CMakeCache.txt:
	cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=Debug -DMEMSCRIPT_SANITIZE=ON \
	  -DMEMSCRIPT_CUDA=OFF -DMEMSCRIPT_TORCH_PYTHON="$$(scripts/bootstrap.sh --print-python)" \
	  -DMEMSCRIPT_LUA_SOURCE="$$(scripts/bootstrap.sh --print-lua)" $(CMAKE_ARGS)

test-sanitize: bootstrap $(SANITIZE_BUILD)/CMakeCache.txt
	cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target memscript_binding_tests memscript
	cd $(SANITIZE_BUILD) && ctest --output-on-failure -L sanitize $(CTEST_ARGS)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h' '*.cu')

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD)
