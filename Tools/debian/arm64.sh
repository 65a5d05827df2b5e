#!/usr/bin/env bash
# make arm64: attled for aarch64 (Raspberry Pi OS 13, arm64 Debian gateways),
# cross-compiled with Debian 13's swiftlang 6.0.3 in the trixie chroot of
# common.sh (check-swift.sh's), against a sysroot unpacked from trixie's arm64
# packages.
#
#   .build/arm64/release/attled         the whole tool (gateway included), Swift
#                                       runtime static, linked against Debian 13's
#                                       shared libssl3t64, libmosquitto1, libc
#   .build/arm64/static/attled          fully static one-shot binary, no gateway
#                                       (as the kernel VM's on x86)
#
# Cached under .build/debian/ (chroot, arm64 .debs, sysroot): a second run only
# builds. Sets up what it needs itself (common.sh's setup_debian: the chroot,
# qemu-user-static and binfmt-support, qemu-aarch64 in binfmt_misc) and runs
# the results' --help under qemu-aarch64 as a check. Needs root.
set -euo pipefail
# Mounts (proc, dev in the chroot) in a private mount namespace: they end with
# this process however it ends, so nothing under .build stays bound to the host.
if [ -z "${ATTLED_UNSHARED:-}" ]; then exec env ATTLED_UNSHARED=1 unshare -m --propagation private "$0" "$@"; fi
NAME=arm64
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT=$ROOT/.build/arm64
# The cache folder, debootstrap, qemu-user-static and binfmt-support, qemu-aarch64
# registered in binfmt_misc (and proved on the host and in the chroot), the
# chroot with swiftlang, its mounts: common.sh, whatever ran before.
setup_debian

# The arm64 sysroot: the C libraries attled links and the Swift runtime for aarch64.
DEBS="libc6:arm64 libc6-dev:arm64 libcrypt1:arm64 libcrypt-dev:arm64 linux-libc-dev libgcc-s1:arm64 libgcc-14-dev:arm64
      libstdc++6:arm64 libstdc++-14-dev:arm64 libbluetooth3:arm64 libbluetooth-dev:arm64 libmosquitto1:arm64
      libmosquitto-dev:arm64 libcjson1:arm64 libcares2:arm64 libssl3t64:arm64 libssl-dev:arm64 zlib1g:arm64 zlib1g-dev:arm64
      libzstd1:arm64 libzstd-dev:arm64 swiftlang:arm64"
if [ ! -f "$CHROOT$SYSROOT/.done" ] || [ "$(cat "$CHROOT$SYSROOT/.done")" != "$(echo $DEBS)" ]; then
    t=$(date +%s)
    say "unpacking trixie's arm64 packages into the sysroot"
    timeout 1200 chroot "$CHROOT" bash -c "dpkg --add-architecture arm64 && apt-get update -qq && rm -rf /arm64-debs && mkdir -p /arm64-debs && cd /arm64-debs && apt-get download -qq $(echo $DEBS)" \
        >"$CACHE/arm64-download.log" 2>&1 || die "downloading the arm64 packages failed (see $CACHE/arm64-download.log)"
    rm -rf "$CHROOT$SYSROOT"; mkdir -p "$CHROOT$SYSROOT"
    for d in "$CHROOT"/arm64-debs/*.deb; do dpkg -x "$d" "$CHROOT$SYSROOT"; done
    ln -sfn usr/lib "$CHROOT$SYSROOT/lib"
    echo $DEBS > "$CHROOT$SYSROOT/.done"
    say "sysroot ready in $(since "$t") ($(du -sh "$CHROOT$SYSROOT" | cut -f1))"
fi
# Debian ships no static ICU for Swift; the static-executable link list still
# names it (attled uses no Foundation that needs it): empty archives stand in.
for lib in icuucswift icui18nswift icudataswift; do
    [ -e "$CHROOT$SYSROOT/usr/lib/aarch64-linux-gnu/lib$lib.a" ] || ar rc "$CHROOT$SYSROOT/usr/lib/aarch64-linux-gnu/lib$lib.a"
done

# SwiftPM 6.0 hands the sysroot only to clang: swiftc gets -sdk, and the
# resource directory of the target's runtime (static: swift_static).
cat > "$CHROOT/arm64-destination.json" <<JSON
{
  "version": 1,
  "sdk": "$SYSROOT",
  "toolchain-bin-dir": "/usr/libexec/swift/bin",
  "target": "aarch64-unknown-linux-gnu",
  "extra-cc-flags": ["-fPIC"],
  "extra-swiftc-flags": ["-use-ld=lld", "-sdk", "$SYSROOT", "-resource-dir", "$SYSROOT/usr/libexec/swift/lib/swift_static"],
  "extra-cpp-flags": []
}
JSON

mkdir -p "$CHROOT/src"
tar -C "$ROOT" --exclude=.build --exclude=./.venv --exclude=./.venv-esphome-newest --exclude=./.git -cf - . | (rm -rf "$CHROOT/src/attled" && mkdir -p "$CHROOT/src/attled" && tar -C "$CHROOT/src/attled" -xf -)

build() { # label env swift-build-args...
    local label=$1 envs=$2; shift 2
    local t; t=$(date +%s)
    say "$label"
    if ! timeout 2400 chroot "$CHROOT" bash -c "cd /src/attled && env $envs swift build -c release --destination /arm64-destination.json $*" \
            >"$CACHE/arm64-$label.log" 2>&1; then
        tail -n 30 "$CACHE/arm64-$label.log"
        die "$label failed (see $CACHE/arm64-$label.log)"
    fi
    say "$label: ok in $(since "$t")"
}
build release "" --build-path /build/arm64 --static-swift-stdlib -Xlinker -s -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now
build static "ATTLED_FULLY_STATIC=1" --build-path /build/arm64-static --static-swift-stdlib -Xswiftc -static-executable -Xlinker -s -Xlinker -lz -Xlinker -lzstd

mkdir -p "$OUT/release" "$OUT/static"
cp "$CHROOT/build/arm64/release/attled" "$OUT/release/attled"
cp "$CHROOT/build/arm64-static/release/attled" "$OUT/static/attled"
for b in "$OUT/release/attled" "$OUT/static/attled"; do
    say "$(file -b "$b" | cut -d, -f1-2,5- | cut -c1-150) ($(stat -c %s "$b") bytes): ${b#$ROOT/}"
done

# Run them under qemu-aarch64 (registered by setup_debian).
timeout 60 "$OUT/static/attled" --help >/dev/null || die "the static aarch64 attled does not run under qemu-aarch64"
say "static binary runs under qemu-aarch64 (attled --help)"
timeout 60 env QEMU_LD_PREFIX="$CHROOT$SYSROOT" "$OUT/release/attled" --help >/dev/null \
    || die "the aarch64 attled does not run under qemu-aarch64 with the arm64 sysroot's libraries"
say "release binary runs under qemu-aarch64 with Debian 13's arm64 libraries (attled --help)"
say "done in $(since "$START")"
