# attled: build, demo and test. `make demo` and `make test` do their own set-up
# on a fresh Debian machine as root (apt packages, the Python venv with the
# pinned Bumble test peer, the Swift build).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
# A module of the test tools' package (Tools/attledtools, installed in the venv): $(TOOL) attledtools.bench.bench ...
TOOL := $(VPY) -m
APT_PACKAGES := libbluetooth-dev libssl-dev libmosquitto-dev mosquitto openssl
STAMP := .build/.stamps

.PHONY: check-debian-swift arm64 test-arm64 deb
.PHONY: all build release bench soak soak-gateway soak-gateway-run soak-gateways fuzz test-kernel setup deps test-deps venv demo test test-unit test-integration clean

all: build

$(STAMP):
	@mkdir -p $(STAMP)

# Debian packages the build and the tests need.
$(STAMP)/apt: | $(STAMP)
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root to apt-get install$$missing (or install them yourself)"; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@touch $@

# The Python venv with the pinned Bumble (the test peer and demo device) and the
# test tools' package, Tools/attledtools, installed editable (Tools/pyproject.toml):
# the scripts, the tests and the processes they start import it with no PYTHONPATH.
# The stamp is remade when the requirements or the package's pyproject change,
# and when the venv itself was made anew (a removed .venv is made again).
$(VENV)/pyvenv.cfg:
	@$(PYTHON) -m venv $(VENV) || { \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null && $(PYTHON) -m venv $(VENV); }

$(STAMP)/venv: Tools/requirements.txt Tools/pyproject.toml $(VENV)/pyvenv.cfg | $(STAMP)
	@$(VPY) -m pip install -q --disable-pip-version-check -r Tools/requirements.txt
	@$(VPY) -m pip install -q --disable-pip-version-check -e Tools
	@touch $@

# A second venv with the newest ESPHome API client (Tools/requirements-esphome-newest.txt):
# attled proxy is judged by the client Home Assistant 2025.4 pins (in .venv) and by the
# newest one, which cannot share a venv with it.
VENV_ESPHOME := .venv-esphome-newest
$(STAMP)/venv-esphome-newest: Tools/requirements-esphome-newest.txt | $(STAMP)
	@test -x $(VENV_ESPHOME)/bin/python || $(PYTHON) -m venv $(VENV_ESPHOME)
	@$(VENV_ESPHOME)/bin/python -m pip install -q --disable-pip-version-check -r Tools/requirements-esphome-newest.txt
	@touch $@

# Test-only Debian packages: tshark is the outside judge of attled's captures,
# systemd-analyze of the gateway's unit file, avahi-daemon publishes the proxy's
# mDNS announcement (python-zeroconf, what Home Assistant uses, is its judge).
$(STAMP)/apt-test: | $(STAMP)
	@command -v tmux >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null; }
	@if ! command -v tshark >/dev/null; then \
	  echo "installing tshark"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >/dev/null; }; \
	fi
	@command -v systemd-analyze >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null; }
	@command -v avahi-daemon >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq avahi-daemon avahi-utils libavahi-client3 >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq avahi-daemon avahi-utils libavahi-client3 >/dev/null; }
	@touch $@

deps: $(STAMP)/apt
venv: $(STAMP)/venv
setup: deps venv
test-deps: setup $(STAMP)/apt-test $(STAMP)/venv-esphome-newest

build: deps
	swift build

release: deps
	swift build -c release --static-swift-stdlib -Xlinker -s
	@ls -l .build/release/attled

# attled against Bumble, side by side (see Tools/attledtools/bench/bench.py): one-shot runs, 1 vs 3
# devices, the binary, the MQTT gateway against a Bumble+paho reference
# (Tools/attledtools/bench/gatewaybench.py; needs the mosquitto broker from APT_PACKAGES),
# and the Bluetooth proxy against a Bumble reference (Tools/attledtools/bench/proxybench.py).
bench: setup release
	@command -v /usr/bin/time >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null; }
	$(TOOL) attledtools.bench.bench --attled .build/release/attled --bench-bin .build/release/attled-bench --json .build/bench.json

# 500 runs in a row against the virtual devices (see Tools/attledtools/soak/soak.py), then the
# gateway soak.
soak: setup build
	$(TOOL) attledtools.soak.soak --attled .build/debug/attled -n 500
	$(MAKE) --no-print-directory soak-gateway-run

# attled gateway: 10,000 commands to the three devices with the devices and the
# broker restarted at random times; final states, nothing lost after the last
# restart, flat memory (see Tools/attledtools/soak/gatewaysoak.py; SOAK_SEED=N to vary).
SOAK_SEED ?= 1
# Three gateways sharing six lamps in three rooms for 10 minutes, a fault every 20 s
# (kill -9, a hang killed by the watchdog, a lamp moving, a bridge partition), commands
# at 5 Hz, +-8 dB noise: failover times, holder changes, double links, commands applied;
# then 10 minutes steady (noise and commands only: no holder may change)
# (see Tools/attledtools/soak/fleetsoak.py).
soak-gateways: setup build
	$(TOOL) attledtools.soak.fleetsoak --duration $(or $(SOAK_SECONDS),600) --seed $(SOAK_SEED) --json .build/fleetsoak.json
	$(TOOL) attledtools.soak.fleetsoak --faults none --duration $(or $(SOAK_SECONDS),600) --seed $(SOAK_SEED) --json .build/fleetsoak-steady.json

soak-gateway: setup build soak-gateway-run
soak-gateway-run:
	$(TOOL) attledtools.soak.gatewaysoak --attled .build/debug/attled -n 10000 --seed $(SOAK_SEED) --json .build/gatewaysoak.json

# Runs attled against the built-in virtual CassarTech LED (pycom profile).
demo: setup build
	$(TOOL) attledtools.demo --attled .build/debug/attled

test-unit: deps
	swift test 2>&1 | tee .build/unit-tests.log | grep -E "^(✔|✘|􀟈|􁁛|Test run|.*error|.*failed|Executed)" | tail -n 40; \
	exit $${PIPESTATUS[0]}

test-integration: test-deps build
	ATTLED_BIN=$(CURDIR)/.build/debug/attled $(VPY) -m pytest -q -p no:cacheprovider Tests/integration

test: test-deps build
	VPY=$(VPY) Tools/test_all.sh

# libFuzzer on every parser (Fuzz/): each harness for FUZZ_SECONDS, two at a time.
FUZZ_SECONDS ?= 600
fuzz: deps
	Fuzz/run.sh run $(FUZZ_SECONDS)

# The HCI user channel against the real Linux Bluetooth subsystem: Debian's stock
# kernel in a qemu guest, hci_vhci bridged over virtio-serial to a Bumble controller.
test-kernel: setup
	Tools/kernelvm/run.sh

# The same on ARM: Debian 13's arm64 kernel under qemu-system-aarch64 (TCG), the
# aarch64 attled from make arm64 on hci0 over the user channel.
test-kernel-arm64: setup
	KERNELVM_ARCH=arm64 Tools/kernelvm/run.sh

# attled and its unit tests with Debian 13's own Swift (swiftlang 6.0.3) in a
# trixie chroot (made once under .build/debian; needs root).
check-debian-swift:
	Tools/debian/check-swift.sh

# aarch64 builds with Debian 13's Swift, cross-compiled in that chroot against
# trixie's arm64 packages: .build/arm64/release/attled (Debian 13's shared
# libraries) and .build/arm64/static/attled (fully static, no gateway).
arm64:
	Tools/debian/arm64.sh

# The aarch64 build does the main job under qemu-aarch64 against the virtual world.
test-arm64: setup
	Tools/debian/test-arm64.sh

# attled_VERSION_amd64.deb and _arm64.deb for Debian 13 in .build/deb (dpkg-deb,
# Depends from dpkg-shlibdeps; installed, run, verified and removed in the chroot).
deb:
	Tools/debian/deb.sh

clean:
	rm -rf .build
