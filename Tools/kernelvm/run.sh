#!/usr/bin/env bash
# Kernel test of attled's default transport, the Linux HCI user channel.
#
# Boots Debian's stock kernel under qemu with a busybox initramfs: Debian 12's
# amd64 kernel under qemu-system-x86_64 (default), or with KERNELVM_ARCH=arm64
# Debian 13's arm64 kernel under qemu-system-aarch64 (-M virt, TCG) with an
# aarch64 busybox, helpers and attled (make arm64's static build). In the
# guest, hci_vhci provides hci0 and vhci_bridge copies its packets over
# virtio-serial to a Bumble virtual controller on the host; the Bumble LED
# peripheral is on the same virtual air. The test list (tests.sh) runs in
# one boot; harness.py serves the guest and judges. The last line of the
# output is "N passed, N failed"; the exit status is non-zero on any failure.
#
# Cached in .build/kernelvm/ (arm64: .build/kernelvm-arm64/; reused across
# runs): the kernel .deb and its unpacked modules, the static helpers, the
# static attled build (arm64: busybox-static's .deb too).
#
# Environment: KERNELVM_ARCH=amd64|arm64 (default amd64), KERNELVM_ACCEL=
# auto|tcg|kvm (auto: KVM only if a probe boot succeeds; the result is cached;
# arm64 is always TCG), KERNELVM_TIMEOUT (seconds for the guest's whole run,
# default 240, arm64 600), KERNELVM_KEEP=1 (keep the work directory),
# ATTLED_STATIC=/path (use this fully static attled instead of building one),
# ATTLED_GATEWAY=/path (the attled with the gateway, instead of the debug build),
# KERNELVM_TESTS=/path (another test file, e.g. while developing one),
# KERNELVM_LIST=NAME (run tests.sh's TEST_LIST_NAME instead of TEST_LIST, e.g.
# arm64: a shorter list for slow TCG hosts; default full, the whole list).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/Tools/kernelvm
ARCH=${KERNELVM_ARCH:-amd64}
case $ARCH in
amd64 | x86_64) ARCH=amd64 ;;
arm64 | aarch64) ARCH=arm64 ;;
*) echo "kernelvm: error: KERNELVM_ARCH=$ARCH: amd64 or arm64"; echo "0 passed, 1 failed"; exit 1 ;;
esac
if [ "$ARCH" = arm64 ]; then
    CACHE=${KERNELVM_CACHE:-$ROOT/.build/kernelvm-arm64}
    LIST=${KERNELVM_LIST:-full}
    TIMEOUT=${KERNELVM_TIMEOUT:-600}
    CC=aarch64-linux-gnu-gcc
    QEMU=qemu-system-aarch64
    # The trixie chroot of Tools/debian (make arm64 makes it): its apt has arm64
    # as a foreign architecture, and its sysroot the gateway's libraries.
    CHROOT=${DEBIAN_CACHE:-$ROOT/.build/debian}/trixie-amd64
    SYSROOT=$CHROOT/sysroot-arm64
else
    CACHE=${KERNELVM_CACHE:-$ROOT/.build/kernelvm}
    LIST=${KERNELVM_LIST:-full}
    TIMEOUT=${KERNELVM_TIMEOUT:-240}
    CC=gcc
    QEMU=qemu-system-x86_64
fi
VPY=$ROOT/.venv/bin/python
START=$(date +%s.%N)

say() { printf 'kernelvm: %s\n' "$*"; }
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
die() { say "error: $*"; echo "0 passed, 1 failed"; exit 1; }

mkdir -p "$CACHE"

# --- Debian packages ---------------------------------------------------------
# qemu, a static busybox, kmod (depmod/modprobe on the host), a compiler and
# static libc for the helpers, cpio for the initramfs.
# arm64: qemu-system-aarch64, the cross compiler and its static libc (busybox
# and the kernel come from trixie's arm64 packages, below).
if [ "$ARCH" = arm64 ]; then
    pkgs="qemu-system-arm kmod gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils cpio file"
else
    pkgs="qemu-system-x86 busybox-static kmod gcc libc6-dev cpio file"
fi
need=()
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
    [ "$(id -u)" = 0 ] || die "need root to apt-get install ${need[*]}"
    say "installing ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
        die "apt-get install ${need[*]} failed"
fi
if [ ! -x "$VPY" ] || ! "$VPY" -c 'import bumble, attledtools' 2>/dev/null; then
    say "setting up the Python venv with Bumble (make venv)"
    make -C "$ROOT" -s venv >/dev/null || die "make venv failed"
fi

# --- the kernel --------------------------------------------------------------
mkdir -p "$CACHE/debs"
if [ "$ARCH" = arm64 ]; then
    # The aarch64 attled (make arm64) first: Tools/debian/arm64.sh also makes the
    # trixie chroot whose apt has arm64 added, which fetches the kernel below.
    if [ -z "${ATTLED_STATIC:-}" ]; then
        a64=$ROOT/.build/arm64/static/attled
        if [ ! -x "$a64" ] || [ -n "$(cd "$ROOT" && find Sources Package.swift -newer "$a64" -print -quit)" ]; then
            t=$(date +%s.%N)
            say "building the aarch64 attled (make arm64; log: $CACHE/arm64.log)"
            timeout 3600 "$ROOT/Tools/debian/arm64.sh" >"$CACHE/arm64.log" 2>&1 ||
                { tail -n 20 "$CACHE/arm64.log"; die "make arm64 failed (log: $CACHE/arm64.log)"; }
            say "make arm64 done ($(since "$t") s)"
        fi
    fi
    [ -d "$CHROOT/var/lib/dpkg" ] || die "no trixie chroot in $CHROOT (make arm64 makes it)"
    # in_trixie CMD: CMD in the chroot, /proc and /dev bound in a private mount
    # namespace (gone when it ends), bounded in time.
    in_trixie() {
        timeout 900 unshare -m --propagation private bash -c 'c=$1; shift; mount --bind /proc "$c/proc" &&
            mount --bind /dev "$c/dev" && cp /etc/resolv.conf "$c/etc/resolv.conf" && chroot "$c" bash -c "$1"' _ "$CHROOT" "$1"
    }
    # linux-image-arm64 (trixie) is a metapackage: its dependency is the real image.
    kdeps() { in_trixie "apt-cache depends linux-image-arm64:arm64" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { sub(/:arm64$/, "", $2); print $2; exit }' || true; }
    kpkg=$(kdeps)
    if [ -z "$kpkg" ] && ! ls "$CACHE"/debs/linux-image-*.deb >/dev/null 2>&1; then
        say "the chroot's apt lists have no linux-image-arm64: apt-get update there"
        in_trixie "dpkg --add-architecture arm64 && apt-get update -qq" >/dev/null 2>&1 || true
        kpkg=$(kdeps)
    fi
    deb=""
    [ -z "$kpkg" ] || deb=$(ls "$CACHE"/debs/"${kpkg}"_*.deb 2>/dev/null | head -n 1 || true)
    bbdeb=$(ls "$CACHE"/debs/busybox-static_*.deb 2>/dev/null | head -n 1 || true)
    if [ -n "$kpkg" ] && { [ -z "$deb" ] || [ -z "$bbdeb" ]; }; then
        say "downloading $kpkg and busybox-static (arm64)"
        in_trixie "rm -rf /kernelvm-debs && mkdir -p /kernelvm-debs && cd /kernelvm-debs &&
            apt-get download -qq $kpkg:arm64 busybox-static:arm64" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true
        if ls "$CHROOT"/kernelvm-debs/"${kpkg}"_*.deb >/dev/null 2>&1; then
            # Keep only the current kernel in the cache.
            for old in "$CACHE"/debs/*.deb; do
                [ -e "$old" ] && rm -rf "$old" "$CACHE/kernel/$(basename "$old" .deb)"
            done
            mv "$CHROOT"/kernelvm-debs/*.deb "$CACHE/debs/"
        fi
        deb=$(ls "$CACHE"/debs/"${kpkg}"_*.deb 2>/dev/null | head -n 1 || true)
        bbdeb=$(ls "$CACHE"/debs/busybox-static_*.deb 2>/dev/null | head -n 1 || true)
    fi
    [ -n "$deb" ] || deb=$(ls -t "$CACHE"/debs/linux-image-*.deb 2>/dev/null | head -n 1 || true)
    [ -n "$deb" ] && [ -f "$deb" ] || die "could not get the kernel package (apt-get download linux-image-arm64's dependency in $CHROOT)"
    [ -n "$bbdeb" ] && [ -f "$bbdeb" ] || die "could not get busybox-static:arm64 (apt-get download in $CHROOT)"
else
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
fi
kdir=$CACHE/kernel/$(basename "$deb" .deb)
if [ ! -f "$kdir/.ok" ]; then
    say "unpacking $(basename "$deb")"
    rm -rf "$kdir"
    mkdir -p "$kdir"
    dpkg -x "$deb" "$kdir"
    # Debian 13 ships the modules under /usr/lib (merged /usr).
    [ -d "$kdir/lib/modules" ] || ln -s usr/lib "$kdir/lib"
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
# arm64: Debian's vmlinuz is the plain Image (EFI stub, signed); one that is
# gzipped is unpacked once.
if [ "$ARCH" = arm64 ] && file -b "$vmlinuz" | grep -q '^gzip'; then
    [ -f "$kdir/Image" ] || gzip -dc "$vmlinuz" >"$kdir/Image"
    kernel=$kdir/Image
fi

# --- static helpers for the guest ----------------------------------------------
mkdir -p "$CACHE/bin"
for t in vhci_bridge hcictl le_att_client; do
    if [ ! -x "$CACHE/bin/$t" ] || [ "$HERE/$t.c" -nt "$CACHE/bin/$t" ]; then
        "$CC" -static -O2 -Wall -Wextra -o "$CACHE/bin/$t" "$HERE/$t.c" || die "$CC $t.c failed"
    fi
done

# --- attled, fully static ------------------------------------------------------
# arm64: make arm64's, run on the host through qemu-aarch64 (binfmt_misc, which
# arm64.sh registers): the check below and the TCP reference of the trace test.
# The registration is made here, in this mount namespace: arm64.sh's, made in
# its private one, can end with it (a binfmt_misc instance that is not the
# initial user namespace's lives as long as its mount).
if [ "$ARCH" = arm64 ]; then
    if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
        command -v qemu-aarch64-static >/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static binfmt-support >/dev/null 2>&1 || true
        mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
        update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    fi
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] ||
        die "qemu-aarch64 could not be registered in binfmt_misc (qemu-user-static, binfmt-support)"
    attled=${ATTLED_STATIC:-$ROOT/.build/arm64/static/attled}
elif [ -n "${ATTLED_STATIC:-}" ]; then
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
# arm64: make arm64's release build, with Debian 13's arm64 libraries from its
# sysroot.
if [ -n "${ATTLED_GATEWAY:-}" ]; then
    attled_gw=$ATTLED_GATEWAY
elif [ "$ARCH" = arm64 ]; then
    attled_gw=$ROOT/.build/arm64/release/attled
else
    t=$(date +%s.%N)
    (cd "$ROOT" && swift build --product attled >"$CACHE/swift-build-gateway.log" 2>&1) ||
        { tail -n 30 "$CACHE/swift-build-gateway.log"; die "swift build of attled (with the gateway) failed (log: $CACHE/swift-build-gateway.log)"; }
    attled_gw=$ROOT/.build/debug/attled
    say "attled with the gateway: $attled_gw ($(since "$t") s)"
fi
QEMU_LD_PREFIX=${SYSROOT:-} "$attled_gw" gateway --help >/dev/null 2>&1 || [ $? -eq 64 ] || die "$attled_gw does not run"

# --- initramfs -------------------------------------------------------------------
# Built afresh for each run in its own work directory (console log, events
# and sockets go there too; kept when something failed).
t=$(date +%s.%N)
work=$(mktemp -d /tmp/attled-kvm-XXXXXX)
stage=$work/initramfs
mkdir -p "$stage"/{bin,dev,proc,sys,tmp,lib/modules,etc}
if [ "$ARCH" = arm64 ]; then
    # busybox-static:arm64, unpacked; its applet links are made in the guest
    # (init.sh: busybox --install), as it does not run here without qemu-user.
    [ -x "$CACHE/busybox/usr/bin/busybox" ] && [ "$CACHE/busybox/usr/bin/busybox" -nt "$bbdeb" ] ||
        { rm -rf "$CACHE/busybox"; dpkg -x "$bbdeb" "$CACHE/busybox"; touch "$CACHE/busybox/usr/bin/busybox"; }
    bb=$CACHE/busybox/usr/bin/busybox
    file -L "$bb" | grep -q 'aarch64.*statically linked' || die "$bb is not a static aarch64 busybox"
    cp "$bb" "$stage/bin/busybox"
    ln -s busybox "$stage/bin/sh"
else
    bb=$(command -v busybox)
    file -L "$bb" | grep -q 'statically linked' || bb=/bin/busybox
    cp "$bb" "$stage/bin/busybox"
    for a in $("$stage/bin/busybox" --list); do
        [ -e "$stage/bin/$a" ] || ln -s busybox "$stage/bin/$a"
    done
fi
# Modules in load order, as kmod resolves the dependencies (built-in ones are
# skipped). Debian 13's arm64 kernel has no hci_vhci (CONFIG_BT_HCIVHCI unset):
# there hci0 is an hci_uart controller on a pty (vhci_bridge -u). Compressed
# modules (trixie's .ko.xz) are unpacked here, for busybox's insmod.
if [ "$ARCH" = arm64 ]; then
    modules="virtio_pci virtio_console virtio_net hci_uart cmac"
else
    modules="virtio_pci virtio_console virtio_net hci_vhci cmac"
fi
kos=""
for m in $modules; do
    deps=$(modprobe -d "$kdir" -S "$kver" --show-depends "$m") || die "module $m: not in kernel $kver"
    kos="$kos $(echo "$deps" | awk '$1 == "insmod" { print $2 }')"
done
: >"$stage/lib/modules/load.order"
for ko in $(printf '%s\n' $kos | awk '!seen[$0]++'); do
    case $ko in
    *.ko.xz) name=$(basename "$ko" .xz); xz -dc "$ko" >"$stage/lib/modules/$name" ;;
    *.ko.zst) name=$(basename "$ko" .zst); zstd -qdc "$ko" >"$stage/lib/modules/$name" ;;
    *.ko.gz) name=$(basename "$ko" .gz); gzip -dc "$ko" >"$stage/lib/modules/$name" ;;
    *) name=$(basename "$ko"); cp "$ko" "$stage/lib/modules/" ;;
    esac
    echo "$name" >>"$stage/lib/modules/load.order"
done
[ -s "$stage/lib/modules/load.order" ] || die "no modules for the guest (modprobe --show-depends $modules)"
cp "$CACHE/bin/vhci_bridge" "$CACHE/bin/hcictl" "$CACHE/bin/le_att_client" "$stage/bin/"
if [ "$ARCH" = arm64 ]; then
    # ldd cannot run an aarch64 binary: the NEEDED entries (readelf), resolved
    # in the sysroot's /usr/lib/aarch64-linux-gnu and copied to the same path in
    # the guest (one of its loader's default directories), recursively.
    libdir=/usr/lib/aarch64-linux-gnu
    add_libs() { # FILE...: their libraries, and those libraries' own
        local f n
        for f in "$@"; do
            for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
                [ -e "$stage$libdir/$n" ] && continue
                [ -e "$SYSROOT$libdir/$n" ] || die "$n (needed by $(basename "$f")) is not in $SYSROOT$libdir"
                mkdir -p "$stage$libdir"
                cp -L "$SYSROOT$libdir/$n" "$stage$libdir/$n"
                add_libs "$stage$libdir/$n"
            done
        done
    }
    install_bin() {
        cp "$1" "$stage/bin/$2"
        file -L "$1" | grep -q 'statically linked' && return 0
        interp=$(readelf -l "$1" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
        mkdir -p "$stage$(dirname "$interp")"
        [ -e "$stage$interp" ] || cp -L "$SYSROOT$libdir/$(basename "$interp")" "$stage$interp"
        add_libs "$1"
    }
    install_bin "$attled" attled
    install_bin "$attled_gw" attled-gw
    # Opened with dlopen (readelf does not list them): the gateway's libmosquitto,
    # and libcrypto for pairing in the dynamic build.
    for n in libmosquitto.so.1 libcrypto.so.3; do
        [ -e "$SYSROOT$libdir/$n" ] || die "$n is not in the sysroot $SYSROOT (make arm64 unpacks it)"
        [ -e "$stage$libdir/$n" ] || cp -L "$SYSROOT$libdir/$n" "$stage$libdir/$n"
        add_libs "$stage$libdir/$n"
    done
else
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
    # awk reads to the end: an early exit can SIGPIPE ldconfig, which pipefail makes fatal.
    mosq=$(ldconfig -p | awk '/libmosquitto\.so\.1 .*x86-64/ && !m { m = $NF } END { print m }')
    [ -n "$mosq" ] || die "libmosquitto.so.1 not found (apt-get install libmosquitto1)"
    for lib in "$mosq" $(ldd "$mosq" | grep -o '/[^ ]*'); do
        mkdir -p "$stage$(dirname "$lib")"
        [ -e "$stage$lib" ] || cp -L "$lib" "$stage$lib"
    done
fi
cp "$HERE/init.sh" "$stage/init"
cp "${KERNELVM_TESTS:-$HERE/tests.sh}" "$stage/tests.sh"
chmod +x "$stage/init"
echo 'root:x:0:0:root:/:/bin/sh' >"$stage/etc/passwd"
(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$work/initrd.cpio"
rm -rf "$stage"
say "initramfs: $(($(stat -c %s "$work/initrd.cpio") / 1024 / 1024)) MiB, kernel $kver ($ARCH, test list $LIST; $(since "$t") s)"
say "set-up took $(since "$START") s"

# The host's attled for `attled serve` (the board the guest's kernel connects
# to): the static one on amd64; on arm64 the host's debug build when there is
# one (the aarch64 attled would run under qemu-user).
host_attled=$attled
[ "$ARCH" = arm64 ] && [ -x "$ROOT/.build/debug/attled" ] && host_attled=$ROOT/.build/debug/attled
keep=()
[ "${KERNELVM_KEEP:-}" = 1 ] && keep=(--keep)
exec "$VPY" "$HERE/harness.py" --kernel "$kernel" --kernel-version "$kver" --initrd "$work/initrd.cpio" \
    --workdir "$work" --attled "$attled" --host-attled "$host_attled" --cache "$CACHE" --accel "${KERNELVM_ACCEL:-auto}" \
    --timeout "$TIMEOUT" --arch "$ARCH" --qemu "$QEMU" --list "$LIST" "${keep[@]}"
