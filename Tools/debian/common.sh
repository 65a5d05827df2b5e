# Shared by check-swift.sh, arm64.sh and deb.sh (sourced after `NAME=...`):
# the paths of the trixie chroot, messages, the root check, and the chroot's
# /proc and /dev binds, made in a private mount namespace (the caller re-execs
# itself there first) and undone on exit.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${DEBIAN_CACHE:-$ROOT/.build/debian}
CHROOT=$CACHE/trixie-amd64
START=$(date +%s)
say() { printf '%s: %s\n' "$NAME" "$*"; }
die() { say "error: $*"; exit 1; }
since() { echo "$(( $(date +%s) - $1 )) s"; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mount): run it with sudo"

mounted=()
cleanup() { for (( i=${#mounted[@]}-1; i>=0; i-- )); do umount -l "${mounted[$i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
# Binds the host's /proc and /dev into the chroot (once) and copies resolv.conf.
mount_chroot() {
    mountpoint -q "$CHROOT/proc" || { mount --bind /proc "$CHROOT/proc"; mounted+=("$CHROOT/proc"); }
    mountpoint -q "$CHROOT/dev" || { mount --bind /dev "$CHROOT/dev"; mounted+=("$CHROOT/dev"); }
    cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
}
