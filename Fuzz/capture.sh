#!/usr/bin/env bash
# Records the real captures the seed corpora come from: attled against the
# virtual LED devices of vworld (Tools/attledtools/drivers/vworld.py, Bumble), each run written with
# --btsnoop (attled's side) and --device-snoop (the peripheral's side).
# Then Fuzz/make_corpus.py cuts them into per-harness seeds.
#
#   Fuzz/capture.sh            (needs `make setup` and `swift build` first)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py="$root/.venv/bin/python"
attled="$root/.build/debug/attled"
dest="$root/Fuzz/captures"
[ -x "$py" ] && [ -x "$attled" ] || { echo "capture: run 'make setup' and 'swift build' first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dest"

# capture NAME "VWORLD OPTIONS" ATTLED ARGS...
capture() {
  local name=$1 world=$2; shift 2
  "$py" -m attledtools.drivers.vworld --host tcp-server:127.0.0.1:0 $world \
      --device-snoop "$tmp/$name-peer.btsnoop" > "$tmp/$name.world" 2>&1 &
  local vw=$! port=""
  for _ in $(seq 100); do
    port=$(grep -o '"attled": *\["tcp:127.0.0.1:[0-9]*' "$tmp/$name.world" 2>/dev/null | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break; sleep 0.1
  done
  [ -n "$port" ] || { kill $vw; echo "capture: vworld did not start for $name" >&2; return 1; }
  local rc=0 cache=(--no-cache)
  [ "$1" = scan ] && cache=()  # scan keeps no cache (and refuses --no-cache)
  timeout 30 "$attled" -i "tcp:127.0.0.1:$port" "${cache[@]}" --btsnoop "$tmp/$name.btsnoop" "$@" > "$tmp/$name.out" 2>&1 || rc=$?
  kill $vw 2>/dev/null; wait $vw 2>/dev/null || true
  cp "$tmp/$name.btsnoop" "$dest/$name.btsnoop"
  [ -s "$tmp/$name-peer.btsnoop" ] && cp "$tmp/$name-peer.btsnoop" "$dest/$name-peer.btsnoop"
  echo "capture: $name (attled exit $rc)"
}

capture pycom       "--device CassarTech:pycom"                           --name CassarTech --rgb 255,0,0
capture particle    "--device Photon:particle"                            --name Photon --rgb 0,255,0
capture harness     "--device Harness:harness"                            send --name Harness --value 01
capture gatt        "--device CassarTech:pycom"                           gatt --name CassarTech
capture get         "--device CassarTech:pycom"                           get --name CassarTech
capture scan        "--device CassarTech:pycom --device Photon:particle"  scan --timeout 1
capture legacy      "--legacy-reports --device Photon:particle:name_in=shortened" --name Photon --rgb 1,2,3
capture connupdate  "--device CassarTech:pycom:conn_update=1,conn_update_delay=0" --name CassarTech --rgb 9,9,9
capture badupdate   "--device CassarTech:pycom:conn_update=1,conn_update_delay=0,conn_update_params=4,2,600,5" --name CassarTech --rgb 9,9,9
capture security    "--device CassarTech:pycom:security_request=1"        --name CassarTech --rgb 7,7,7
capture mtu23       "--device CassarTech:pycom:mtu=23"                    gatt --name CassarTech
capture oversize    "--device CassarTech:pycom:fault_oversize=read_by_group" gatt --name CassarTech
capture indicate    "--device Harness:harness:fault_indicate=write"       send --name Harness --value 01
capture stray       "--device CassarTech:pycom:fault_stray_notify=read_by_type,fault_spurious_error=write" --name CassarTech --rgb 1,1,1
capture truncated   "--device CassarTech:pycom:fault_truncate=read_by_type" --name CassarTech --rgb 1,1,1
capture wrongop     "--device CassarTech:pycom:fault_wrong_opcode=find_by_type" --name CassarTech --rgb 1,1,1
echo "capture: $(ls "$dest" | wc -l) files in $dest"
