# Quick start (as root on Debian 12): `make demo` and `make test`.
# Every target first installs the Debian packages that are missing, then configures and builds.
BUILD     ?= build
FUZZBUILD ?= build-fuzz
ASANBUILD ?= build-asan
JOBS      ?= $(shell nproc)
FUZZ_SECONDS ?= 30
# `make test` runs each fuzz target this long, to catch a clang break or a quick crash.
TEST_FUZZ_SECONDS ?= 3
SOAK_SECONDS ?= 600

DEB_PKGS := cmake g++ make pkg-config libgtest-dev libboost-dev libpcap-dev libisal-dev \
            libibverbs-dev librdmacm-dev tshark python3-scapy wireshark-dev clang libclang-rt-14-dev \
            ibverbs-utils perftest qperf rdmacm-utils libdpdk-dev libxdp-dev libbpf-dev iproute2 clang-format \
            ucx-utils libfabric-bin openmpi-bin libopenmpi-dev mpich libmpich-dev fio iperf3 \
            python3-matplotlib dpkg-dev file python3-yaml nlohmann-json3-dev libmicrohttpd-dev liblwip-dev \
            prometheus

.PHONY: setup configure build test demo install deb fuzz fuzz-build soak asan bench format clean

setup:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

configure: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# The suite, then the fuzz targets built with clang and run briefly (label fuzz, docs/fuzzing.md).
test: build fuzz-build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE '^(fuzz|soak)$$'
	cd $(FUZZBUILD) && FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) ctest --output-on-failure -j$(JOBS) -L '^fuzz$$'

demo: build
	@bash tools/demo.sh $(BUILD)
# PREFIX defaults to /usr/local; DESTDIR stages (docs/install.md).
PREFIX    ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# $(BUILD)/softrdma_VERSION_ARCH.deb (and softrdma-wireshark_…deb with the plugin), prefix /usr,
# Depends from dpkg-shlibdeps (cmake/package.cmake, docs/install.md).
deb: build
	cd $(BUILD) && cpack -G DEB

# libFuzzer targets, built with clang (only they and what they link), each run for FUZZ_SECONDS
# (label fuzz; docs/fuzzing.md).
fuzz-build: setup
	CC=clang CXX=clang++ cmake -S . -B $(FUZZBUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTRDMA_FUZZ=ON
	cmake --build $(FUZZBUILD) -j$(JOBS) --target fuzz_targets

fuzz: fuzz-build
	cd $(FUZZBUILD) && FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure -L '^fuzz$$'

# Mixed RC/UC/UD traffic between processes under injected faults for SOAK_SECONDS, watching RSS
# and open fds (label soak, never part of `make test`; docs/fuzzing.md#soak).
soak: build
	cd $(BUILD) && SOAK_SECONDS=$(SOAK_SECONDS) ctest --verbose -L '^soak$$'

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: setup
	cmake -S . -B $(ASANBUILD) -DCMAKE_BUILD_TYPE=Debug -DSOFTRDMA_SANITIZE=ON
	cmake --build $(ASANBUILD) -j$(JOBS)
	cd $(ASANBUILD) && ctest --output-on-failure -j$(JOBS) -LE '^(fuzz|soak)$$'

# Benchmarks (figures, never assertions): softrdma through perftest against kernel TCP, on
# each backend against kernel TCP across a veth pair at MTU 1500 and 9000 (bench/wire.sh, as
# root; a plot in build/bench-wire.png), and UCX and MPI over softrdma
# against UCX's TCP transport (bench/middleware.sh).
bench: build
	$(BUILD)/bin/rxe_bench 3
	$(BUILD)/bin/rxe_scale_bench 3
	$(BUILD)/bin/iwarp_bench 3
	bash bench/verbs_vs_tcp.sh $(BUILD) 5
	bash bench/verbs_vs_tcp.sh $(BUILD) 5 iwarp
	bash bench/wire.sh $(BUILD) 3
	bash bench/middleware.sh $(BUILD) 3
	/usr/bin/python3 bench/incast.py $(BUILD)/bin/softrdma $(BUILD)/bench-incast.png
	/usr/bin/python3 bench/incast.py $(BUILD)/bin/softrdma $(BUILD)/bench-incast-processes.png \
	  --processes 4 --seconds 5

format:
	find wire pcap lint tools tests cm iwarp monitor -name '*.cpp' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(FUZZBUILD) $(ASANBUILD)
