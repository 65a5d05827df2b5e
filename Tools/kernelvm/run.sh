#!/usr/bin/env bash
# Kernel test of attled's default transport, the Linux HCI user channel.
#
# Boots Debian's stock kernel under qemu with a busybox initramfs. In the
# guest, hci_vhci provides hci0 and vhci_bridge copies its packets over
# virtio-serial to a Bumble virtual controller on the host; the Bumble LED
# peripheral is on the same virtual air. The test list (tests.sh) runs in
# one boot; harness.py serves the guest and judges. The last line of the
# output is "N passed, N failed"; the exit status is non-zero on any failure.
#
# Cached in .build/kernelvm/ (reused across runs): the kernel .deb and its
# unpacked modules, the static helpers, the static attled build.
#
# Environment: KERNELVM_ACCEL=auto|tcg|kvm (auto: KVM only if a probe boot
# succeeds; the result is cached), KERNELVM_TIMEOUT (seconds for the guest's
# whole run, default 240), KERNELVM_KEEP=1 (keep the work directory),
# ATTLED_STATIC=/path (use this fully static attled instead of building one),
# ATTLED_GATEWAY=/path (the attled with the gateway, instead of the debug build),
# KERNELVM_TESTS=/path (another test list, e.g. while developing one).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/Tools/kernelvm
CACHE=${KERNELVM_CACHE:-$ROOT/.build/kernelvm}
VPY=$ROOT/.venv/bin/python
START=$(date +%s.%N)

say() { printf 'kernelvm: %s\n' "$*"; }
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
die() { say "error: $*"; echo "0 passed, 1 failed"; exit 1; }

mkdir -p "$CACHE"

# --- Debian packages ---------------------------------------------------------
# qemu, a static busybox, kmod (depmod/modprobe on the host), a compiler and
# static libc for the helpers, cpio for the initramfs.
need=()
for p in qemu-system-x86 busybox-static kmod gcc libc6-dev cpio file; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
    [ "$(id -u)" = 0 ] || die "need root to apt-get install ${need[*]}"
    say "installing ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
        die "apt-get install ${need[*]} failed"
fi
if [ ! -x "$VPY" ] || ! "$VPY" -c 'import bumble' 2>/dev/null; then
    say "setting up the Python venv with Bumble (make venv)"
    make -C "$ROOT" -s venv >/dev/null || die "make venv failed"
fi

# --- the kernel --------------------------------------------------------------
# linux-image-amd64 is a metapackage: its dependency is the real image.
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }' || true)
if [ -z "$kpkg" ] && ! ls "$CACHE"/debs/linux-image-*.deb >/dev/null 2>&1; then
    say "apt lists have no linux-image-amd64: apt-get update"
    apt-get update -qq >/dev/null
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }' || true)
fi
mkdir -p "$CACHE/debs"
download() {
    (cd "$CACHE/debs" && apt-get download "$kpkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
    ls "$CACHE"/debs/"${kpkg}"_*.deb 2>/dev/null | head -n 1 || true
}
deb=""
if [ -n "$kpkg" ]; then
    deb=$(ls "$CACHE"/debs/"${kpkg}"_*.deb 2>/dev/null | head -n 1 || true)
    if [ -z "$deb" ]; then
        say "downloading $kpkg"
        deb=$(download)
        if [ -z "$deb" ]; then
            say "apt-get download failed: apt-get update and retry"
            apt-get update -qq >/dev/null || true
            deb=$(download)
        fi
        # Keep only the current kernel in the cache.
        if [ -n "$deb" ]; then
            for old in "$CACHE"/debs/linux-image-*.deb; do
                [ "$old" = "$deb" ] || rm -rf "$old" "$CACHE/kernel/$(basename "$old" .deb)"
            done
        fi
    fi
fi
[ -n "$deb" ] || deb=$(ls -t "$CACHE"/debs/linux-image-*.deb 2>/dev/null | head -n 1 || true)
[ -n "$deb" ] && [ -f "$deb" ] || die "could not get the kernel package (apt-get download linux-image-amd64's dependency)"
kdir=$CACHE/kernel/$(basename "$deb" .deb)
if [ ! -f "$kdir/.ok" ]; then
    say "unpacking $(basename "$deb")"
    rm -rf "$kdir"
    mkdir -p "$kdir"
    dpkg -x "$deb" "$kdir"
    kver=$(ls "$kdir/lib/modules" | head -n 1)
    depmod -b "$kdir" "$kver"
    touch "$kdir/.ok"
fi
kver=$(ls "$kdir/lib/modules" | head -n 1)
vmlinuz=$kdir/boot/vmlinuz-$kver
[ -f "$vmlinuz" ] || die "no kernel image in $deb"
# Under TCG, decompressing the kernel takes seconds on every boot: unpack the
# ELF vmlinux once (xz payload) and boot it through its PVH entry point.
# Falls back to the bzImage when that is not possible.
kernel=$vmlinuz
if [ ! -f "$kdir/vmlinux" ] && grep -q '^CONFIG_PVH=y' "$kdir/boot/config-$kver"; then
    python3 - "$vmlinuz" "$kdir/vmlinux" <<'PY' || rm -f "$kdir/vmlinux"
import lzma, sys
data = open(sys.argv[1], "rb").read()
i = data.find(b"\xfd7zXZ\x00")
out = lzma.LZMADecompressor().decompress(data[i:]) if i >= 0 else b""
if not out.startswith(b"\x7fELF"):
    sys.exit(1)
open(sys.argv[2], "wb").write(out)
PY
fi
[ -f "$kdir/vmlinux" ] && kernel=$kdir/vmlinux

# --- static helpers for the guest ----------------------------------------------
mkdir -p "$CACHE/bin"
for t in vhci_bridge hcictl; do
    if [ ! -x "$CACHE/bin/$t" ] || [ "$HERE/$t.c" -nt "$CACHE/bin/$t" ]; then
        gcc -static -O2 -Wall -Wextra -o "$CACHE/bin/$t" "$HERE/$t.c" || die "gcc $t.c failed"
    fi
done

# --- attled, fully static ------------------------------------------------------
if [ -n "${ATTLED_STATIC:-}" ]; then
    attled=$ATTLED_STATIC
else
    t=$(date +%s.%N)
    # Without the gateway: libmosquitto has no static library.
    if ! (cd "$ROOT" && ATTLED_FULLY_STATIC=1 swift build -c release --scratch-path "$CACHE/swift" \
        --static-swift-stdlib -Xswiftc -static-executable -Xlinker -s >"$CACHE/swift-build.log" 2>&1); then
        tail -n 30 "$CACHE/swift-build.log"
        die "swift build of the static attled failed (log: $CACHE/swift-build.log)"
    fi
    attled=$CACHE/swift/release/attled
    [ -x "$attled" ] || die "swift build of the static attled failed"
    say "attled built ($(since "$t") s)"
fi
"$attled" --help >/dev/null 2>&1 || [ $? -eq 64 ] || die "$attled does not run"

# --- attled with the gateway (libmosquitto), for the gateway test ----------------
# Debian ships libmosquitto only as a shared library, so the fully static build
# leaves the gateway out. The gateway test runs the debug build of the same
# tree (what make test builds anyway), its shared libraries copied by ldd.
if [ -n "${ATTLED_GATEWAY:-}" ]; then
    attled_gw=$ATTLED_GATEWAY
else
    t=$(date +%s.%N)
    (cd "$ROOT" && swift build --product attled >"$CACHE/swift-build-gateway.log" 2>&1) ||
        { tail -n 30 "$CACHE/swift-build-gateway.log"; die "swift build of attled (with the gateway) failed (log: $CACHE/swift-build-gateway.log)"; }
    attled_gw=$ROOT/.build/debug/attled
    say "attled with the gateway: $attled_gw ($(since "$t") s)"
fi
"$attled_gw" gateway --help >/dev/null 2>&1 || [ $? -eq 64 ] || die "$attled_gw does not run"

# --- initramfs -------------------------------------------------------------------
# Built afresh for each run in its own work directory (console log, events
# and sockets go there too; kept when something failed).
t=$(date +%s.%N)
work=$(mktemp -d /tmp/attled-kvm-XXXXXX)
stage=$work/initramfs
mkdir -p "$stage"/{bin,dev,proc,sys,tmp,lib/modules,etc}
bb=$(command -v busybox)
file -L "$bb" | grep -q 'statically linked' || bb=/bin/busybox
cp "$bb" "$stage/bin/busybox"
for a in $("$stage/bin/busybox" --list); do
    [ -e "$stage/bin/$a" ] || ln -s busybox "$stage/bin/$a"
done
# Modules in load order, as kmod resolves the dependencies.
: >"$stage/lib/modules/load.order"
for m in virtio_pci virtio_console virtio_net hci_vhci cmac; do
    modprobe -d "$kdir" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r ko; do
    cp "$ko" "$stage/lib/modules/"
    basename "$ko" >>"$stage/lib/modules/load.order"
done
cp "$CACHE/bin/vhci_bridge" "$CACHE/bin/hcictl" "$stage/bin/"
# install BINARY NAME: into the guest's /bin, with the shared libraries ldd lists
# (at the same paths, the dynamic loader included) when it is not fully static.
install_bin() {
    cp "$1" "$stage/bin/$2"
    if ! file -L "$1" | grep -q 'statically linked'; then
        ldd "$1" | grep -o '/[^ ]*' | while read -r lib; do
            mkdir -p "$stage$(dirname "$lib")"
            [ -e "$stage$lib" ] || cp -L "$lib" "$stage$lib"
        done
    fi
}
install_bin "$attled" attled
install_bin "$attled_gw" attled-gw
# The gateway opens libmosquitto.so.1 itself (dlopen; ldd does not list it):
# the library and what it needs go in too.
mosq=$(ldconfig -p | awk '/libmosquitto\.so\.1 .*x86-64/ { print $NF; exit }')
[ -n "$mosq" ] || die "libmosquitto.so.1 not found (apt-get install libmosquitto1)"
for lib in "$mosq" $(ldd "$mosq" | grep -o '/[^ ]*'); do
    mkdir -p "$stage$(dirname "$lib")"
    [ -e "$stage$lib" ] || cp -L "$lib" "$stage$lib"
done
cp "$HERE/init.sh" "$stage/init"
cp "${KERNELVM_TESTS:-$HERE/tests.sh}" "$stage/tests.sh"
chmod +x "$stage/init"
echo 'root:x:0:0:root:/:/bin/sh' >"$stage/etc/passwd"
(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$work/initrd.cpio"
rm -rf "$stage"
say "initramfs: $(($(stat -c %s "$work/initrd.cpio") / 1024 / 1024)) MiB, kernel $kver ($(since "$t") s)"
say "set-up took $(since "$START") s"

keep=()
[ "${KERNELVM_KEEP:-}" = 1 ] && keep=(--keep)
exec "$VPY" "$HERE/harness.py" --kernel "$kernel" --kernel-version "$kver" --initrd "$work/initrd.cpio" \
    --workdir "$work" --attled "$attled" --cache "$CACHE" --accel "${KERNELVM_ACCEL:-auto}" \
    --timeout "${KERNELVM_TIMEOUT:-240}" "${keep[@]}"
