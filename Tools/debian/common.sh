# Shared by check-swift.sh, arm64.sh, deb.sh and test-arm64.sh (sourced after
# `NAME=...`, in the private mount namespace the caller re-execs itself into):
# the paths of the trixie chroot, messages, the root check, and setup_debian,
# the one set-up every one of them calls first, so that each works alone, from
# a fresh clone, in any order, whatever is or is not installed here.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${DEBIAN_CACHE:-$ROOT/.build/debian}
CHROOT=$CACHE/trixie-amd64
SYSROOT=/sysroot-arm64 # inside the chroot (arm64.sh unpacks it)
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What the chroot has: Debian 13's Swift and the -dev packages attled builds with.
CHROOT_PACKAGES="swiftlang libbluetooth-dev libmosquitto-dev libssl-dev libstdc++-14-dev ca-certificates"
BINFMT=/proc/sys/fs/binfmt_misc
START=$(date +%s)
say() { printf '%s: %s\n' "$NAME" "$*"; }
die() { say "error: $*"; exit 1; }
since() { echo "$(( $(date +%s) - $1 )) s"; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount, binfmt_misc): run it with sudo"

mounted=()
cleanup() { for (( i=${#mounted[@]}-1; i>=0; i-- )); do umount -l "${mounted[$i]}" 2>/dev/null || true; done; }
trap cleanup EXIT

# setup_debian [--no-qemu]: everything the scripts here need, each step done
# only when missing (a second call costs a second):
#   1. the cache folder (.build/debian, or $DEBIAN_CACHE);
#   2. the host's packages: debootstrap, and qemu-user-static with binfmt-support
#      (checked one by one: one of them being there says nothing of the other);
#   3. binfmt_misc mounted and qemu-aarch64 registered in it, enabled, with the F
#      flag (the kernel opens the interpreter at registration, so aarch64
#      programs run inside the chroot too), proved by running a tiny aarch64
#      program; if that cannot be done, a clear error saying what to do;
#   4. the trixie amd64 chroot (debootstrap, then $CHROOT_PACKAGES), made once;
#   5. its /proc and /dev binds and resolv.conf, and (3.) proved in the chroot.
# --no-qemu (check-swift.sh, amd64 only) leaves out qemu and binfmt_misc.
setup_debian() {
    local qemu=1
    [ "${1:-}" = --no-qemu ] && qemu=
    mkdir -p "$CACHE"
    host_packages debootstrap ${qemu:+qemu-user-static binfmt-support}
    [ -z "$qemu" ] || register_qemu_aarch64
    make_chroot
    mount_chroot
    [ -z "$qemu" ] || run_aarch64_probe "in the chroot" chroot "$CHROOT" /aarch64-probe
}

# Installs the Debian packages named that are not installed (a removed package
# whose configuration files are left counts as not installed).
host_packages() {
    local p missing=()
    for p in "$@"; do
        [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
    done
    [ ${#missing[@]} = 0 ] && return 0
    say "installing ${missing[*]} on this machine (apt-get)"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; }; } \
        >"$CACHE/host-apt.log" 2>&1 \
        || { tail -n 20 "$CACHE/host-apt.log"; die "apt-get install ${missing[*]} failed (see $CACHE/host-apt.log)"; }
}

# qemu-aarch64 in binfmt_misc, enabled and with the F flag, whatever was there:
# binfmt_misc mounted (in this mount namespace) if it is not; an entry that is
# disabled is enabled, one without F removed; then binfmt-support's
# update-binfmts imports and enables qemu-user-static's format, or, failing
# that, qemu-user-static's binfmt.d line is written to the kernel directly.
register_qemu_aarch64() {
    local entry=$BINFMT/qemu-aarch64 conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    local todo="on the host, as root: apt-get install qemu-user-static binfmt-support; mount -t binfmt_misc binfmt_misc $BINFMT; update-binfmts --enable qemu-aarch64 (a container cannot do this itself: do it on its host, or run this on a VM or machine)"
    if ! mountpoint -q "$BINFMT" && ! mount -t binfmt_misc binfmt_misc "$BINFMT" 2>"$CACHE/binfmt.log"; then
        # A container's host may have registered it (with F) all the same.
        if aarch64_runs "$CACHE/aarch64-probe"; then
            say "binfmt_misc cannot be mounted here, but aarch64 programs run (qemu-aarch64 registered outside): going on"
            return 0
        fi
        die "cannot mount binfmt_misc on $BINFMT ($(tr '\n' ' ' <"$CACHE/binfmt.log")), so qemu-aarch64 cannot be registered to run aarch64 programs. To fix: $todo"
    fi
    [ "$(cat "$BINFMT/status" 2>/dev/null)" = enabled ] || echo 1 >"$BINFMT/status" 2>/dev/null || true
    if [ -e "$entry" ] && ! grep -q '^flags:.*F' "$entry"; then
        say "qemu-aarch64 is registered without the F flag (its interpreter would not be found in a chroot): registering it again"
        echo -1 >"$entry" || die "cannot remove the binfmt_misc entry $entry. To fix: $todo"
    fi
    if [ -e "$entry" ] && ! grep -qx enabled "$entry"; then
        say "qemu-aarch64 is registered but disabled: enabling it"
        echo 1 >"$entry" || die "cannot enable the binfmt_misc entry $entry. To fix: $todo"
    fi
    if [ ! -e "$entry" ]; then
        say "registering qemu-aarch64 in binfmt_misc (update-binfmts)"
        {
            update-binfmts --display qemu-aarch64 | grep -q '^qemu-aarch64' || update-binfmts --import qemu-aarch64
            [ -e "$entry" ] || update-binfmts --enable qemu-aarch64
        } >"$CACHE/binfmt.log" 2>&1 || true
        if [ ! -e "$entry" ] && [ -f "$conf" ]; then
            say "update-binfmts did not register it (see $CACHE/binfmt.log): writing $conf to $BINFMT/register"
            cat "$conf" >"$BINFMT/register" 2>>"$CACHE/binfmt.log" || true
        fi
        [ -e "$entry" ] || die "qemu-aarch64 could not be registered in binfmt_misc (see $CACHE/binfmt.log). To fix: $todo"
        grep -q '^flags:.*F' "$entry" || die "qemu-aarch64 was registered without the F flag, so it cannot run aarch64 programs in the chroot. To fix: echo -1 > $entry, then $todo"
    fi
    run_aarch64_probe "on this machine" "$CACHE/aarch64-probe"
}

# aarch64_runs command...: whether a 132-byte static aarch64 program that only
# exits with status 42 (ELF header, one PT_LOAD, then mov x0, #42; mov x8, #93
# (exit); svc #0), written to $CACHE/aarch64-probe (and the chroot's /), runs
# there: the proof that the kernel hands aarch64 programs to qemu-aarch64,
# before anything is built or installed on that assumption.
aarch64_runs() {
    local probe=$CACHE/aarch64-probe rc=0
    printf '%b' '\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00' \
        '\x02\x00\xb7\x00\x01\x00\x00\x00\x78\x00\x40\x00\x00\x00\x00\x00' \
        '\x40\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' \
        '\x00\x00\x00\x00\x40\x00\x38\x00\x01\x00\x00\x00\x00\x00\x00\x00' \
        '\x01\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' \
        '\x00\x00\x40\x00\x00\x00\x00\x00\x00\x00\x40\x00\x00\x00\x00\x00' \
        '\x84\x00\x00\x00\x00\x00\x00\x00\x84\x00\x00\x00\x00\x00\x00\x00' \
        '\x00\x10\x00\x00\x00\x00\x00\x00' \
        '\x40\x05\x80\xd2\xa8\x0b\x80\xd2\x01\x00\x00\xd4' >"$probe"
    chmod 0755 "$probe"
    [ ! -d "$CHROOT" ] || cp "$probe" "$CHROOT/aarch64-probe"
    timeout 60 "$@" 2>"$CACHE/aarch64-probe.log" || rc=$?
    echo "exit status $rc" >>"$CACHE/aarch64-probe.log"
    [ "$rc" = 42 ]
}
run_aarch64_probe() { # where command...
    local where=$1; shift
    aarch64_runs "$@" || die "an aarch64 program does not run $where under qemu-aarch64 ($(tr -c '[:print:]' ' ' <"$CACHE/aarch64-probe.log" | cut -c1-200)) although binfmt_misc has: $(tr '\n' ' ' 2>/dev/null <"$BINFMT/qemu-aarch64"). To fix: echo -1 > $BINFMT/qemu-aarch64, then run this again, or on the host, as root: apt-get install qemu-user-static binfmt-support; update-binfmts --enable qemu-aarch64"
}

# The trixie amd64 chroot with Debian 13's Swift, made here when missing
# (debootstrap, then $CHROOT_PACKAGES; each step once, kept under $CACHE).
make_chroot() {
    local t
    if [ ! -f "$CHROOT/.debootstrap-done" ]; then
        t=$(date +%s)
        say "debootstrap trixie (amd64) into $CHROOT"
        rm -rf "$CHROOT"
        timeout 1800 debootstrap --variant=minbase --components=main trixie "$CHROOT" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
            || { tail -n 20 "$CACHE/debootstrap.log"; die "debootstrap failed (see $CACHE/debootstrap.log)"; }
        touch "$CHROOT/.debootstrap-done"
        say "chroot made in $(since "$t")"
    fi
    if [ ! -f "$CHROOT/.packages-done" ] || [ "$(cat "$CHROOT/.packages-done")" != "$CHROOT_PACKAGES" ]; then
        mount_chroot
        t=$(date +%s)
        say "installing $CHROOT_PACKAGES in the chroot"
        timeout 1500 chroot "$CHROOT" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $CHROOT_PACKAGES" \
            >"$CACHE/apt.log" 2>&1 || { tail -n 20 "$CACHE/apt.log"; die "apt-get in the chroot failed (see $CACHE/apt.log)"; }
        echo "$CHROOT_PACKAGES" > "$CHROOT/.packages-done"
        say "packages installed in $(since "$t")"
    fi
}

# Binds the host's /proc and /dev into the chroot (once) and copies resolv.conf.
mount_chroot() {
    mountpoint -q "$CHROOT/proc" || { mount --bind /proc "$CHROOT/proc"; mounted+=("$CHROOT/proc"); }
    mountpoint -q "$CHROOT/dev" || { mount --bind /dev "$CHROOT/dev"; mounted+=("$CHROOT/dev"); }
    cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
}
