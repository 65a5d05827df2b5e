#!/usr/bin/env bash
# make check-debian-swift: attled and its unit tests with Debian 13's own Swift
# (swiftlang 6.0.3), in a trixie amd64 chroot made here with debootstrap.
#
# Cached under .build/debian/: the chroot (debootstrap, then swiftlang and the
# -dev packages; common.sh's setup_debian) is made once; a second run copies the
# sources in and builds.
# The build directory inside the chroot is kept too (incremental).
# Needs root (debootstrap, chroot, mount). Every step has a deadline.
# --chroot-only: make the chroot and stop.
set -euo pipefail
# Mounts (proc, dev in the chroot) in a private mount namespace: they end with
# this process however it ends, so nothing under .build stays bound to the host.
if [ -z "${ATTLED_UNSHARED:-}" ]; then exec env ATTLED_UNSHARED=1 unshare -m --propagation private "$0" "$@"; fi

NAME=check-debian-swift
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# The cache folder, debootstrap, the chroot with swiftlang (common.sh); no qemu.
setup_debian --no-qemu
say "$(chroot "$CHROOT" swift --version 2>&1 | head -n 1)"
[ "${1:-}" = "--chroot-only" ] && exit 0

# The sources as they are now (committed or not), without build products.
mkdir -p "$CHROOT/src"
tar -C "$ROOT" --exclude=.build --exclude=./.venv --exclude=./.venv-esphome-newest --exclude=./.git -cf - . | (rm -rf "$CHROOT/src/attled" && mkdir -p "$CHROOT/src/attled" && tar -C "$CHROOT/src/attled" -xf -)

run() { # label timeout command...
    local label=$1 limit=$2; shift 2
    local t; t=$(date +%s)
    say "$label"
    if ! timeout "$limit" chroot "$CHROOT" bash -c "cd /src/attled && $*" >"$CACHE/$label.log" 2>&1; then
        tail -n 30 "$CACHE/$label.log"
        die "$label failed (see $CACHE/$label.log)"
    fi
    say "$label: ok in $(since "$t")"
}
run release 1800 "swift build -c release --build-path /build/release"
run build-tests 1800 "swift build --build-tests --build-path /build/debug"
run unit-tests 600 "swift test --skip-build --build-path /build/debug"
grep -E "Test run with [0-9]+ tests" "$CACHE/unit-tests.log" | tail -n 1
say "done in $(since "$START") (Swift 6.0.3 from Debian 13: release build, tests built and passed)"
