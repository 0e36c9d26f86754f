# The two set-up commands of the README:
#   make demo   install missing Debian packages, build, run the main job on shipped defaults
#   make test   same set-up, then every CPU test (ctest, labels unit and cli)
# Other targets: make build, make sanitize (ASan+UBSan CPU tests), make bench, make format,
# make clean.

BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
DEB_PACKAGES := cmake g++ make nlohmann-json3-dev libeigen3-dev libcli11-dev doctest-dev libbenchmark-dev \
                libopenmpi-dev openmpi-bin
CMAKE_FLAGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TPO := $(BUILD_DIR)/cli/tpo

.PHONY: all deps cudnn-frontend configure build demo test sanitize fuzz bench format clean

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "tpo: installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "tpo: all Debian packages present"; fi

# cuDNN's fused attention needs the header-only cudnn-frontend (PyPI: nvidia-cudnn-frontend):
# its wheel is downloaded and its headers unpacked into BUILD_DIR/_deps, where CUDA's cuDNN (or
# a Python wheel's, as PyTorch installs it) is found. Optional: without them the build uses the cuBLAS attention.
FRONTEND := $(BUILD_DIR)/_deps/cudnn-frontend
# The version built and reviewed here; pinned so that every build compiles the same headers.
CUDNN_FRONTEND_VERSION := 1.32.0
cudnn-frontend:
	@if { [ -e /usr/local/cuda/include/cudnn.h ] || python3 -c 'import nvidia.cudnn' 2>/dev/null; } && \
	    [ ! -e $(FRONTEND)/include/cudnn_frontend.h ]; then \
	  echo "tpo: fetching the cudnn-frontend headers (PyPI nvidia-cudnn-frontend)"; \
	  mkdir -p $(FRONTEND) && rm -f $(FRONTEND)/*.whl && \
	  if python3 -m pip download -q --no-deps -d $(FRONTEND) nvidia-cudnn-frontend==$(CUDNN_FRONTEND_VERSION) 2>/dev/null && \
	     python3 -m zipfile -e $(FRONTEND)/*.whl $(FRONTEND)/wheel && \
	     cp -r $(FRONTEND)/wheel/include $(FRONTEND)/include; then \
	    echo "tpo: cudnn-frontend headers in $(FRONTEND)/include"; \
	  else echo "tpo: cudnn-frontend not available; building with the cuBLAS attention only"; fi; \
	  rm -rf $(FRONTEND)/wheel $(FRONTEND)/*.whl; \
	fi

configure: deps cudnn-frontend
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	@mkdir -p results/demo
	$(TPO) plan --model llama2-70b --hardware rtx4090x8 --tp 8 --seq 512:16384 \
	  --json results/demo/plan.json --csv results/demo/plan.csv --svg results/demo/plan.svg
	$(TPO) simulate --model llama2-70b --hardware rtx4090x8 --tp 8 --seq 4096 --compare \
	  --json results/demo/simulate-compare.json --trace results/demo/simulate-compare.trace.json

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE gpu

# The CPU tests again, built with AddressSanitizer and UndefinedBehaviorSanitizer (CUDA and MPI
# off; any undefined behaviour aborts). CI runs it after `make test`.
SAN_DIR ?= build-sanitize
sanitize: deps
	cmake -S . -B $(SAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPO_ENABLE_CUDA=OFF \
	  -DTPO_ENABLE_MPI=OFF -DTPO_BUILD_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
	cmake --build $(SAN_DIR) -j $(JOBS)
	cd $(SAN_DIR) && ctest --output-on-failure -j $(JOBS) -LE gpu

# libFuzzer on every parser (model, hardware, profile, plan, nccl-tests), FUZZ_SECONDS each,
# seeded with the shipped files; clang with ASan and UBSan. A crash leaves crash-* files in
# FUZZ_DIR/corpus-NAME and fails the target.
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
# FUZZ_RUNS=N: N executions per parser instead of FUZZ_SECONDS (the issue's bar: 1000000).
FUZZ_RUNS ?=
FUZZ_LIMIT = $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS),-max_total_time=$(FUZZ_SECONDS))
fuzz: deps
	@command -v clang++ > /dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTPO_ENABLE_CUDA=OFF -DTPO_ENABLE_MPI=OFF -DTPO_BUILD_BENCH=OFF -DTPO_BUILD_TESTS=OFF \
	  -DTPO_BUILD_FUZZ=ON \
	  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
	cmake --build $(FUZZ_DIR) -j $(JOBS)
	@set -e; run() { name=$$1; shift; mkdir -p $(FUZZ_DIR)/corpus-$$name; \
	  echo "tpo: fuzzing $$name ($(FUZZ_LIMIT))"; \
	  rc=0; (cd $(FUZZ_DIR) && ./tests/fuzz/fuzz_$$name $(FUZZ_LIMIT) \
	    -rss_limit_mb=4096 -dict=$(CURDIR)/tests/fuzz/tpo.dict -print_final_stats=1 \
	    -artifact_prefix=corpus-$$name/ corpus-$$name "$$@" > fuzz-$$name.log 2>&1) || rc=$$?; \
	  grep -E "stat::number_of_executed_units|Done|ERROR|SUMMARY" $(FUZZ_DIR)/fuzz-$$name.log | head -4; \
	  [ $$rc = 0 ] || { echo "tpo: fuzz_$$name FOUND A BUG: $(FUZZ_DIR)/fuzz-$$name.log"; exit 1; }; }; \
	run model $(CURDIR)/configs/models $(CURDIR)/tests/data; \
	run hardware $(CURDIR)/configs/hardware; \
	run profile $(CURDIR)/configs/profiles; \
	run plan $(CURDIR)/results/h200/2026-11-29 $(CURDIR)/results/papers; \
	run nccl_tests $(CURDIR)/tests/data; \
	run allreduce_csv $(CURDIR)/tests/data

bench: build
	$(BUILD_DIR)/bench/tpo-bench

format:
	find sim planner profiler validate cli tests bench \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) \
	  | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(SAN_DIR) $(FUZZ_DIR)
