#!/usr/bin/env bash
# make test-arm64: the aarch64 attled (make arm64) does the real job under
# qemu-aarch64 (binfmt_misc) against the virtual world: the integration tests
# of the main job (test_led.py, test_multi.py, test_scan.py, test_cache.py)
# and pairing (test_pairing.py: libcrypto.so.3, opened with dlopen, is Debian
# 13's arm64 one), Bumble's controllers, with ATTLED_BIN the arm64 build (the
# one make deb packages) and Debian 13's arm64 libraries from the sysroot
# (QEMU_LD_PREFIX).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SYSROOT=${DEBIAN_CACHE:-$ROOT/.build/debian}/trixie-amd64/sysroot-arm64
BIN=$ROOT/.build/arm64/release/attled
"$ROOT/Tools/debian/arm64.sh"
# qemu-aarch64 registered here, in this mount namespace: arm64.sh's
# registration, made in its private one, can end with it (a binfmt_misc
# instance outside the initial user namespace lives as long as its mount).
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
fi
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || { echo "test-arm64: error: qemu-aarch64 is not registered in binfmt_misc (qemu-user-static, binfmt-support; see arm64.sh)"; exit 1; }
cd "$ROOT"
QEMU_LD_PREFIX=$SYSROOT ATTLED_BIN=$BIN timeout 1800 "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider -k "not rootcanal" \
    Tests/integration/test_led.py Tests/integration/test_multi.py Tests/integration/test_scan.py Tests/integration/test_cache.py \
    Tests/integration/test_pairing.py
