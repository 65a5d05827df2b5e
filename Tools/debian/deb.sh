#!/usr/bin/env bash
# make deb: attled_VERSION_amd64.deb and attled_VERSION_arm64.deb for Debian 13,
# built with dpkg-deb in the trixie chroot of check-swift.sh: the binary (Swift
# runtime static, Debian 13's shared libraries), the gateway's systemd unit
# (Tools/attled-gateway.service, hardened as it is, paths moved to /usr/bin),
# /etc/default/attled-gateway (its arguments; a conffile), a man page made from
# `attled --help`, copyright and changelog. Depends comes from dpkg-shlibdeps,
# plus libmosquitto1 and libssl3t64 from their shlibs files (attled opens
# libmosquitto.so.1 for the gateway and libcrypto.so.3 for pairing with dlopen).
# Each package is then installed in the chroot (arm64 through multiarch and
# qemu-aarch64), `attled --help` run, the unit checked by systemd-analyze
# verify, and removed; lintian's errors fail the build. Sets up what it needs
# itself (common.sh's setup_debian), make arm64 included. Needs root.
set -euo pipefail
# Mounts (proc, dev in the chroot) in a private mount namespace: they end with
# this process however it ends, so nothing under .build stays bound to the host.
if [ -z "${ATTLED_UNSHARED:-}" ]; then exec env ATTLED_UNSHARED=1 unshare -m --propagation private "$0" "$@"; fi
NAME=deb
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT=$ROOT/.build/deb
# The maintainer: the repository's author of record (MAINTAINER overrides).
MAINTAINER=${MAINTAINER:-$(git -C "$ROOT" log -1 --format='%an <%ae>' 2>/dev/null || echo "attled maintainers <attled@example.org>")}
VERSION=$(sed -n 's/.*static let string = "\([0-9][0-9.]*\)".*/\1/p' "$ROOT/Sources/BLEWire/Version.swift")
[ -n "$VERSION" ] || die "cannot read the version from Sources/BLEWire/Version.swift"

# The cache folder, the chroot, qemu-user-static, binfmt-support and qemu-aarch64
# in binfmt_misc (the arm64 package is installed and run in the chroot), its
# mounts: common.sh, whatever ran before.
setup_debian

# The arm64 binary (and the amd64 sources in the chroot).
say "make arm64 (log: ${CACHE#$ROOT/}/deb-arm64.log)"
"$ROOT/Tools/debian/arm64.sh" >"$CACHE/deb-arm64.log" 2>&1 || { tail -20 "$CACHE/deb-arm64.log"; die "make arm64 failed"; }
in_chroot() { timeout "$1" chroot "$CHROOT" bash -c "set -euo pipefail; $2"; }

TOOLS="dpkg-dev lintian systemd fakeroot libc6:arm64 libssl3t64:arm64 libmosquitto1:arm64 libstdc++6:arm64 libgcc-s1:arm64"
if [ "$(cat "$CHROOT/.deb-tools-done" 2>/dev/null)" != "$TOOLS" ]; then
    t=$(date +%s)
    say "installing $TOOLS in the chroot"
    in_chroot 1800 "dpkg --add-architecture arm64; apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $TOOLS" \
        >"$CACHE/deb-apt.log" 2>&1 || { tail -20 "$CACHE/deb-apt.log"; die "apt-get in the chroot failed"; }
    echo "$TOOLS" > "$CHROOT/.deb-tools-done"
    say "tools installed in $(since "$t")"
fi

t=$(date +%s)
say "amd64 release build (Swift 6.0.3, runtime static)"
# Linked with lld, as the arm64 build: with ld.bfd the Swift runtime's writable
# .rodata input sections start the RW segment, and -z relro gives no GNU_RELRO
# (lintian: hardening-no-relro).
in_chroot 2400 "cd /src/attled && swift build -c release --build-path /build/release-static --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -s -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now --product attled" \
    >"$CACHE/deb-amd64-build.log" 2>&1 || { tail -30 "$CACHE/deb-amd64-build.log"; die "the amd64 build failed"; }
say "amd64 built in $(since "$t")"
mkdir -p "$CHROOT/pkg"
cp "$CHROOT/build/release-static/release/attled" "$CHROOT/pkg/attled-amd64"
cp "$ROOT/.build/arm64/release/attled" "$CHROOT/pkg/attled-arm64"
for arch in amd64 arm64; do
    readelf -lW "$CHROOT/pkg/attled-$arch" | grep -q GNU_RELRO || die "the $arch binary has no GNU_RELRO segment (-z relro did not take)"
done
cp "$ROOT/Tools/attled-gateway.service" "$CHROOT/pkg/attled-gateway.service"
cp "$ROOT/Tools/attled-proxy.service" "$CHROOT/pkg/attled-proxy.service"

mkdir -p "$OUT"
for arch in amd64 arm64; do
    say "attled_${VERSION}_${arch}.deb"
    in_chroot 600 "
        p=/pkg/attled_${arch}; rm -rf \$p /pkg/work; mkdir -p \$p/DEBIAN \$p/usr/bin \$p/usr/lib/systemd/system \$p/etc/default \
            \$p/usr/share/doc/attled \$p/usr/share/man/man1 /pkg/work/debian
        install -m 0755 /pkg/attled-$arch \$p/usr/bin/attled
        sed -e 's|/usr/local/bin/attled|/usr/bin/attled|' -e 's|file:///usr/local/share/doc/attled/README.md|man:attled(1)|' \
            -e 's|^Environment=ATTLED_ARGS=.*|Environment=ATTLED_ARGS=\"-i hci0 --mqtt 127.0.0.1:1883\"\nEnvironmentFile=-/etc/default/attled-gateway|' \
            /pkg/attled-gateway.service > \$p/usr/lib/systemd/system/attled-gateway.service
        chmod 0644 \$p/usr/lib/systemd/system/attled-gateway.service
        # The proxy's unit as it is (its arguments in a drop-in, its key in /etc/attled/api-key).
        sed -e 's|/usr/local/bin/attled|/usr/bin/attled|' -e 's|file:///usr/local/share/doc/attled/README.md|man:attled(1)|' \
            -e 's|^#   install -m 0755 .*|#   apt install ./attled_VERSION_ARCH.deb (this unit comes with it)|' \
            -e '/^#   install -m 0644 Tools\/attled-proxy.service/d' \
            /pkg/attled-proxy.service > \$p/usr/lib/systemd/system/attled-proxy.service
        chmod 0644 \$p/usr/lib/systemd/system/attled-proxy.service
        printf '%s\n' '# Arguments of attled gateway (attled(1)): the adapter, the broker, the lamps.' \
            '# The password belongs in a credential file (see the unit), never here.' \
            'ATTLED_ARGS=\"-i hci0 --mqtt 127.0.0.1:1883\"' > \$p/etc/default/attled-gateway
        echo /etc/default/attled-gateway > \$p/DEBIAN/conffiles
        { echo '.TH ATTLED 1 \"\" \"attled $VERSION\" \"User Commands\"'; echo '.SH NAME'
          echo 'attled \\- drive Bluetooth LE lamps over HCI, bridge them to MQTT'
          echo '.SH DESCRIPTION'; echo '.nf'
          /pkg/attled-amd64 --help 2>&1 | sed -e 's/\\\\/\\\\e/g' -e \"s/^[.']/\\\\\\\\\\&&/\"
          echo '.fi'; } | gzip -9n > \$p/usr/share/man/man1/attled.1.gz
        printf '%s\n' 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' 'Upstream-Name: attled' '' \
            'Files: *' 'Copyright: 2026 the attled authors' 'License: see the project repository' > \$p/usr/share/doc/attled/copyright
        printf 'attled (%s) unstable; urgency=medium\n\n  * Built by make deb.\n\n -- $MAINTAINER  %s\n' \
            '$VERSION' \"\$(date -R)\" | gzip -9n > \$p/usr/share/doc/attled/changelog.gz
        cd /pkg/work; printf 'Source: attled\n\nPackage: attled\nArchitecture: any\n' > debian/control
        deps=\$(DEB_HOST_ARCH=$arch dpkg-shlibdeps -O -e\$p/usr/bin/attled 2>dpkg-shlibdeps.err | sed -n 's/^shlibs:Depends=//p') || true
        [ -n \"\$deps\" ] || { cat dpkg-shlibdeps.err >&2; echo 'dpkg-shlibdeps found no dependencies' >&2; exit 1; }
        # The libraries attled opens with dlopen (dpkg-shlibdeps cannot see them):
        # libmosquitto.so.1 (the gateway) and libcrypto.so.3 (pairing, encrypted
        # links), each package and minimal version from that package's own shlibs file.
        for lib in 'libmosquitto 1 libmosquitto1' 'libcrypto 3 libssl3t64'; do
            set -- \$lib
            dep=\$(awk -v n=\$1 -v v=\$2 '\$1 == n && \$2 == v { \$1 = \"\"; \$2 = \"\"; sub(/^ +/, \"\"); print; exit }' /var/lib/dpkg/info/\$3:$arch.shlibs)
            [ -n \"\$dep\" ] || { echo \"no shlibs entry for \$1.so.\$2 in \$3:$arch\" >&2; exit 1; }
            case \"\$deps\" in *\"\$3 \"*|*\"\$3,\"*|*\"\$3\") ;; *) deps=\"\$deps, \$dep\" ;; esac
        done
        size=\$(du -sk --exclude=DEBIAN \$p | cut -f1)
        printf 'Package: attled\nVersion: %s\nArchitecture: %s\nMaintainer: $MAINTAINER\nInstalled-Size: %s\nDepends: %s\nRecommends: avahi-daemon, libavahi-client3\nSection: net\nPriority: optional\nHomepage: https://example.invalid/attled\nDescription: Bluetooth LE host stack and LED lamp tool over HCI\n attled drives a Bluetooth LE controller directly over HCI (no bluetoothd)\n to find, set and read LED lamps, and bridges them to MQTT and Home\n Assistant (attled gateway), and makes the box a Home Assistant Bluetooth\n proxy over the ESPHome native API (attled proxy); hardened systemd units.\n' \
            '$VERSION' $arch \$size \"\$deps\" > \$p/DEBIAN/control
        fakeroot dpkg-deb --build --root-owner-group \$p /pkg/attled_${VERSION}_${arch}.deb > /dev/null
        echo \"Depends: \$deps\"
        lintian --tag-display-limit 0 /pkg/attled_${VERSION}_${arch}.deb > /pkg/lintian-$arch.txt 2>&1 || true
        grep -c '^E:' /pkg/lintian-$arch.txt > /pkg/lintian-$arch.errors || true
    " | sed 's/^/  /' || die "building the $arch package failed"
    cp "$CHROOT/pkg/attled_${VERSION}_${arch}.deb" "$CHROOT/pkg/lintian-$arch.txt" "$OUT/"
    errors=$(cat "$CHROOT/pkg/lintian-$arch.errors")
    grep -E '^(E|W):' "$OUT/lintian-$arch.txt" | sed 's/^/  lintian: /' || true
    [ "$errors" = 0 ] || die "lintian: $errors error(s) in the $arch package (see $OUT/lintian-$arch.txt)"
    say "install, run, verify and remove the $arch package in the chroot"
    in_chroot 300 "dpkg -i /pkg/attled_${VERSION}_${arch}.deb > /dev/null
        attled --help > /dev/null
        # Pairing needs libcrypto.so.3 (opened with dlopen): the package that has it
        # is a dependency, and the library is there.
        dpkg-deb -f /pkg/attled_${VERSION}_${arch}.deb Depends | grep -q 'libssl3t64 (>='
        test -e /usr/lib/\$(dpkg-architecture -a$arch -qDEB_HOST_MULTIARCH 2>/dev/null)/libcrypto.so.3
        systemd-analyze verify /usr/lib/systemd/system/attled-gateway.service /usr/lib/systemd/system/attled-proxy.service
        grep -q '^ExecStart=/usr/bin/attled proxy ' /usr/lib/systemd/system/attled-proxy.service
        dpkg-deb -f /pkg/attled_${VERSION}_${arch}.deb Recommends | grep -q libavahi-client3
        test -f /etc/default/attled-gateway
        dpkg -r attled > /dev/null; ! command -v attled > /dev/null; dpkg --purge attled > /dev/null; ! test -e /etc/default/attled-gateway" \
        || die "the $arch package did not install, run and remove cleanly"
    say "$(stat -c %s "$OUT/attled_${VERSION}_${arch}.deb") bytes: ${OUT#$ROOT/}/attled_${VERSION}_${arch}.deb (installed, ran, removed)"
done
say "done in $(since "$START")"
