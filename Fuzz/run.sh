#!/usr/bin/env bash
# libFuzzer harnesses for attled's parsers (see Fuzz/README.md).
#
#   Fuzz/run.sh build                       build Fuzz/.build/attled-fuzz (+ fuzz-<harness> links)
#   Fuzz/run.sh run [SECONDS] [HARNESS...]  fuzz each harness SECONDS (default 60) on a scratch
#                                           copy of its corpus; FUZZ_PARALLEL=N harnesses at once
#   Fuzz/run.sh smoke                       every harness ~5 s, non-zero exit on any crash
#   Fuzz/run.sh repro HARNESS FILE...       run the harness once on saved inputs
#   Fuzz/run.sh minimize [HARNESS...]       shrink corpus/<harness> to the inputs that add coverage
#   Fuzz/run.sh list                        the harness names
#
# Needs only the Swift toolchain (its libFuzzer and ASan runtimes), and the
# libbluetooth-dev headers, libssl-dev (libcrypto) and libmosquitto-dev the
# root package needs too. The stack's modules are compiled with swiftc straight from Sources/,
# one static library per module in dependency order, instrumented with
# -sanitize=fuzzer,address.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
out="$here/.build"
SWIFTC=${SWIFTC:-swiftc}
HARNESSES=(h4 hci-event adv l2cap att signalling btsnoop trace cli transport-spec smp smp-responder gatt-server json ha-command api-frames api-message api-noise)
# Module, then the modules it imports, dependencies first: read from Package.swift
# (Fuzz/modules.py), the closure of what Fuzz/Sources imports.
modules() {
  local list
  list=$(cd "$root" && swift package dump-package 2>/dev/null | python3 "$here/modules.py") && [ -n "$list" ] \
    || die "cannot read the module graph (swift package dump-package | Fuzz/modules.py)"
  mapfile -t MODULES <<< "$list"
}
FLAGS=(-O -g -wmo -swift-version 6 -parse-as-library -sanitize=fuzzer,address -I "$out/modules")
# The C targets (Sources/C*): each one's module map on the include path, and the
# ones with C sources (the dlopen loaders: libmosquitto, libcrypto, libavahi-client)
# compiled and linked in, so a C target added to the package needs nothing here.
C_SOURCES=()
for d in "$root"/Sources/C*/; do
  d=${d%/}
  if [ -d "$d/include" ]; then FLAGS+=(-I "$d/include"); else FLAGS+=(-I "$d"); fi
  for c in "$d"/*.c; do [ -f "$c" ] && C_SOURCES+=("$c"); done
done

die() { echo "fuzz: $*" >&2; exit 1; }

max_len() {
  case $1 in
    transport-spec) echo 256 ;; cli|trace|adv|smp|ha-command) echo 1024 ;; hci-event|signalling) echo 300 ;;
    btsnoop|api-frames) echo 16384 ;; *) echo 4096 ;;
  esac
}

# Compiles Sources/<name> into a static library, only when its sources, the flags or a
# dependency changed.
build_module() {
  local name=$1; shift
  local srcs=("$root/Sources/$name"/*.swift)
  local key
  key=$( { printf '%s\n' "${FLAGS[@]}" "$($SWIFTC --version 2>&1 | head -1)"; cat "${srcs[@]}"
           for d in "$@"; do cat "$out/modules/$d.stamp"; done; } | sha256sum | cut -c1-16)
  if [ -f "$out/modules/$name.stamp" ] && [ "$(cat "$out/modules/$name.stamp")" = "$key" ] && [ -f "$out/lib/lib$name.a" ]; then
    return 0
  fi
  echo "  swiftc $name (${#srcs[@]} files)"
  (cd "$out" && "$SWIFTC" "${FLAGS[@]}" -module-name "$name" -emit-module -emit-module-path "$out/modules/$name.swiftmodule" \
    -emit-library -static -o "$out/lib/lib$name.a" "${srcs[@]}") 2> "$out/logs/build-$name.log" \
    || { cat "$out/logs/build-$name.log" >&2; die "building $name failed"; }
  echo "$key" > "$out/modules/$name.stamp"
}

cmd_build() {
  command -v "$SWIFTC" >/dev/null || die "no swiftc on PATH"
  mkdir -p "$out/modules" "$out/lib" "$out/logs"
  # One build at a time; a fuzzer still running keeps the binary it started with.
  exec 9> "$out/.build.lock"
  flock 9
  local t0=$SECONDS
  modules
  echo "fuzz: building the stack's modules with -sanitize=fuzzer,address"
  # Modules whose dependencies are built compile side by side (never more than two here).
  local built=() pending=("${MODULES[@]}")
  while [ ${#pending[@]} -gt 0 ]; do
    local ready=() rest=()
    for m in "${pending[@]}"; do
      local ok=1
      for d in ${m#"${m%% *}"}; do [[ " ${built[*]} " == *" $d "* ]] || ok=0; done
      if [ $ok = 1 ]; then ready+=("$m"); else rest+=("$m"); fi
    done
    [ ${#ready[@]} -gt 0 ] || die "module graph has a cycle"
    local pids=()
    for m in "${ready[@]}"; do build_module $m & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p" || die "module build failed"; done
    for m in "${ready[@]}"; do built+=("${m%% *}"); done
    pending=("${rest[@]+"${rest[@]}"}")
  done
  local libs=() stamps=()
  for ((i=${#MODULES[@]}-1; i>=0; i--)); do
    local n=${MODULES[$i]%% *}; libs+=("-l$n"); stamps+=("$out/modules/$n.stamp")
  done
  local key
  key=$( { printf '%s\n' "${FLAGS[@]}"; cat "$here"/Sources/*.swift "${C_SOURCES[@]}" "${stamps[@]}"; } | sha256sum | cut -c1-16)
  if ! [ -x "$out/attled-fuzz" ] || [ "$(cat "$out/attled-fuzz.stamp" 2>/dev/null)" != "$key" ]; then
    echo "  swiftc attled-fuzz (harnesses, link)"
    local objs=() c
    for c in "${C_SOURCES[@]}"; do
      local t; t=$(basename "$(dirname "$c")")
      local inc="$(dirname "$c")/include"
      cc -c -O1 -fPIC -I "$inc" "$c" -o "$out/lib/$t.o" 2> "$out/logs/build-$t.log" \
        || { cat "$out/logs/build-$t.log" >&2; die "building $t failed"; }
      objs+=("$out/lib/$t.o")
    done
    # From $out: swiftc leaves the executable's module files in the working directory.
    (cd "$out" && "$SWIFTC" "${FLAGS[@]}" -module-name AttledFuzz "$here"/Sources/*.swift -L "$out/lib" "${libs[@]}" \
      "${objs[@]}" -ldl -lswiftSynchronization -o "$out/attled-fuzz.new") 2> "$out/logs/build-attled-fuzz.log" \
      || { cat "$out/logs/build-attled-fuzz.log" >&2; die "building the harnesses failed"; }
    mv -f "$out/attled-fuzz.new" "$out/attled-fuzz"
    echo "$key" > "$out/attled-fuzz.stamp"
  fi
  local h  # not the caller's (repro keeps its harness in h)
  for h in "${HARNESSES[@]}"; do ln -sf attled-fuzz "$out/fuzz-$h"; done
  flock -u 9
  echo "fuzz: built $out/attled-fuzz in $((SECONDS - t0)) s"
}

check_harness() { [[ " ${HARNESSES[*]} " == *" $1 "* ]] || die "unknown harness '$1' (have: ${HARNESSES[*]})"; }

# Fuzzes one harness for $2 seconds; prints one summary line; returns non-zero on a finding.
# Scratch corpora and logs live in a directory of this invocation's own ($run), so
# runs started side by side do not disturb each other.
fuzz_one() {
  local h=$1 secs=$2
  local work="$run/$h"
  mkdir -p "$work/corpus" "$out/crashes"
  cp "$here/corpus/$h"/* "$work/corpus/" 2>/dev/null || true
  local dict=()
  [ -f "$here/dict/$h.dict" ] && dict=(-dict="$here/dict/$h.dict")
  local log="$run/$h.log" rc=0
  (cd "$work" && SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:malloc_context_size=0} "$out/fuzz-$h" corpus "${dict[@]}" \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$h")" \
      -artifact_prefix="$out/crashes/$h-" -print_final_stats=1 ${FUZZ_FLAGS:-}) > "$log" 2>&1 || rc=$?
  local execs cov ft corp
  execs=$(grep -ao 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  cov=$(grep -aoE '(cov|ft|corp): [0-9]+' "$log" | tail -3 | tr '\n' ' ')
  if [ $rc = 0 ]; then
    printf '%-15s ok     %8ss  execs %-10s %s\n' "$h" "$secs" "${execs:-?}" "$cov"
  else
    local art
    art=$(grep -aoE "Test unit written to [^ ]+" "$log" | tail -1 | cut -d' ' -f5-)
    printf '%-15s FAILED %8ss  execs %-10s %s\n' "$h" "$secs" "${execs:-?}" "$cov"
    grep -aE '^(==[0-9]+==ERROR|SUMMARY|fuzz invariant|Fatal error|.*Fatal error)' "$log" | head -5 | sed 's/^/    /'
    echo "    input: ${art:-see $log}   log: $log"
  fi
  return $rc
}

# Runs fuzz_one over the harnesses, FUZZ_PARALLEL at a time; fails if any failed.
fuzz_all() {
  local secs=$1; shift
  run="$out/runs/$(date +%Y%m%d-%H%M%S)-$$"
  mkdir -p "$run"
  # Keep the five latest runs' logs and scratch corpora.
  ls -1dt "$out/runs"/*/ 2>/dev/null | tail -n +6 | xargs -r rm -rf
  echo "fuzz: logs and scratch corpora in $run"
  local par=${FUZZ_PARALLEL:-2} failed=0 pids=()
  for h in "$@"; do
    fuzz_one "$h" "$secs" & pids+=($!)
    if [ ${#pids[@]} -ge "$par" ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
  done
  for p in "${pids[@]+"${pids[@]}"}"; do wait "$p" || failed=1; done
  return $failed
}

case ${1:-} in
  build) cmd_build ;;
  run)
    shift
    secs=60
    if [[ ${1:-} =~ ^[0-9]+$ ]]; then secs=$1; shift; fi
    hs=("$@"); [ ${#hs[@]} -gt 0 ] || hs=("${HARNESSES[@]}")
    for h in "${hs[@]}"; do check_harness "$h"; done
    cmd_build
    fuzz_all "$secs" "${hs[@]}" ;;
  smoke)
    cmd_build
    t0=$SECONDS
    # A fixed seed: make test checks the corpus and the same few seconds of mutation every
    # time, so a run fails for a change, not for the luck of the draw. Finding new inputs
    # is the job of `run` (make fuzz), which draws a fresh seed; its findings go into
    # corpus/ and a regression test.
    rc=0; FUZZ_FLAGS="-seed=${FUZZ_SEED:-1} ${FUZZ_FLAGS:-}" fuzz_all "${FUZZ_SMOKE_SECONDS:-5}" "${HARNESSES[@]}" || rc=$?
    echo "fuzz: smoke of ${#HARNESSES[@]} harnesses in $((SECONDS - t0)) s: $([ $rc = 0 ] && echo ok || echo FAILED)"
    exit $rc ;;
  repro)
    shift; h=${1:-}; check_harness "$h"; shift
    [ $# -gt 0 ] || die "repro needs input files"
    cmd_build >/dev/null
    SWIFT_BACKTRACE=enable=no "$out/fuzz-$h" -runs=1 "$@" ;;
  minimize)
    # Keeps, of each harness's corpus, only the inputs that add coverage (libFuzzer -merge).
    shift; hs=("$@"); [ ${#hs[@]} -gt 0 ] || hs=("${HARNESSES[@]}")
    cmd_build >/dev/null
    for h in "${hs[@]}"; do
      check_harness "$h"
      rm -rf "$out/merge/$h"; mkdir -p "$out/merge/$h"
      SWIFT_BACKTRACE=enable=no "$out/fuzz-$h" -merge=1 -max_len="$(max_len "$h")" "$out/merge/$h" "$here/corpus/$h" > "$out/logs/merge-$h.log" 2>&1 \
        || { tail -5 "$out/logs/merge-$h.log"; die "merge of $h failed"; }
      before=$(ls "$here/corpus/$h" | wc -l)
      rm -f "$here/corpus/$h"/*; cp "$out/merge/$h"/* "$here/corpus/$h/"
      echo "fuzz: $h corpus $before -> $(ls "$here/corpus/$h" | wc -l) inputs"
    done ;;
  list) printf '%s\n' "${HARNESSES[@]}" ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 64 ;;
esac
