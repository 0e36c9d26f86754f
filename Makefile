# The two set-up commands of the README:
#   make demo   install missing Debian packages, build, run the main job on shipped defaults
#   make test   same set-up, then every CPU test (ctest, labels unit and cli)
# Other targets: make build, make bench, make format, make clean.

BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
DEB_PACKAGES := cmake g++ make nlohmann-json3-dev libeigen3-dev libcli11-dev doctest-dev libbenchmark-dev \
                libopenmpi-dev openmpi-bin
CMAKE_FLAGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TPO := $(BUILD_DIR)/cli/tpo

.PHONY: all deps configure build demo test bench format clean

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "tpo: installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "tpo: all Debian packages present"; fi

configure: deps
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

bench: build
	$(BUILD_DIR)/bench/tpo-bench

format:
	find sim planner profiler validate cli tests bench \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) \
	  | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
