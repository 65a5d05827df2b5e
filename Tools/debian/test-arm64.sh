#!/usr/bin/env bash
# make test-arm64: the aarch64 attled (make arm64) does the real job under
# qemu-aarch64 (binfmt_misc) against the virtual world: the integration tests
# of the main job (test_led.py, test_multi.py, test_scan.py, test_cache.py)
# and pairing (test_pairing.py: libcrypto.so.3, opened with dlopen, is Debian
# 13's arm64 one), Bumble's controllers, with ATTLED_BIN the arm64 build (the
# one make deb packages) and Debian 13's arm64 libraries from the sysroot
# (QEMU_LD_PREFIX). Sets up what it needs itself (common.sh's setup_debian),
# make arm64 included; the Python venv is the Makefile's (make setup). Needs root.
set -euo pipefail
# One private mount namespace for the set-up, make arm64 and the tests: the
# binfmt_misc mount (and, where binfmt_misc is per user namespace, the
# qemu-aarch64 registration that lives as long as that mount) and the chroot's
# binds stay while the tests run and end with them.
if [ -z "${ATTLED_UNSHARED:-}" ]; then exec env ATTLED_UNSHARED=1 unshare -m --propagation private "$0" "$@"; fi
NAME=test-arm64
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
setup_debian
[ -x "$ROOT/.venv/bin/python" ] || die "no Python venv in $ROOT/.venv: run make test-arm64 (it makes it: make setup)"
"$ROOT/Tools/debian/arm64.sh"
cd "$ROOT"
QEMU_LD_PREFIX=$CHROOT$SYSROOT ATTLED_BIN=$ROOT/.build/arm64/release/attled timeout 1800 "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider -k "not rootcanal" \
    Tests/integration/test_led.py Tests/integration/test_multi.py Tests/integration/test_scan.py Tests/integration/test_cache.py \
    Tests/integration/test_pairing.py
