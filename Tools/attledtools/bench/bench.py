"""make bench: attled against Bumble, side by side, on the same virtual device.

Starts the virtual controllers and the virtual CassarTech LED (pycom profile,
100 ms advertising), then runs, alternating, N times each:
  - attled cold:  `attled --name CassarTech --rgb ...` with an empty cache,
  - attled warm:  the same with a warm cache (remembered address and handles),
  - bumble:       drivers/bumble_central.py, the same job done the ordinary way
                  with Bumble's own API (scan, connect, discover, write, disconnect).
For each it prints the median and spread of whole-process wall time, CPU time
(user+sys), peak RSS and the number of ATT transactions (from each process's
own btsnoop capture), plus attled's phase times, and every figure as a ratio
against the Bumble run measured in the same invocation (these machines are
noisy). Each attled kind also gets an air time model (below).

Then "1 vs 3 devices" (issue 11): a second virtual world with three lamps
(Lamp1 pycom, Lamp2 particle, Lamp3 pycom, 100 ms advertising), and N runs
each, alternating, of a one-device set (`--name Lamp1`) and a three-device set
(`--name Lamp1 --name Lamp2 --name Lamp3`, concurrent links, one scan), both
cold (--no-cache): median and p90 of wall time and the ratio of the medians,
3-device / 1-device (the issue's target: at most 1.5x).

Air time model: the virtual link delivers a packet at once, but on real radio
every ATT request/response round trip costs at least one connection interval.
The model is round trips (ATT requests the host sent) x the connection
interval granted (attled's progress line "interval X ms"), next to what the
same round trips cost at 30 ms, the minimum of the 30-50 ms attled asked for
before it asked for 7.5-15 ms. With several links the links run concurrently:
the run's air time is the longest link's, "sum" adds them all.

Then the release binary's size and start-up time, and parser throughput
(attled-bench).

Then "gateway" (issue 12, gatewaybench.py): `attled gateway` against a
reference gateway written with Bumble's and paho's own APIs
(gateway_reference.py), side by side on a private mosquitto: latency
from MQTT publish to the device's last Write Request (p50/p90/p99/max over
--gateway-n commands), and a burst of 200 commands (time to the last colour,
writes after coalescing, ends on the last colour). Run it alone with
`PYTHONPATH=Tools .venv/bin/python -m attledtools.bench.gatewaybench --attled .build/debug/attled`.

Then "gateway-air" (issue 18, gatewayair.py): the air-time model of a
gateway command on a fresh and on an idle link, on Root Canal (round trips x
the interval in effect + latency x interval); at most 100 ms for a pycom lamp.

--sections picks sections (default: all five).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bumble import att

from attledtools import REPO_ROOT, module_command, module_env
from attledtools.drivers.worldproc import WorldProcess, free_port

ROOT = REPO_ROOT
# The ATT PDUs counted (the host's requests and commands): Bumble's opcodes.
_OP = att.Opcode
REQUESTS = {
    _OP.ATT_EXCHANGE_MTU_REQUEST, _OP.ATT_FIND_INFORMATION_REQUEST, _OP.ATT_FIND_BY_TYPE_VALUE_REQUEST,
    _OP.ATT_READ_BY_TYPE_REQUEST, _OP.ATT_READ_REQUEST, _OP.ATT_READ_BLOB_REQUEST, _OP.ATT_READ_MULTIPLE_REQUEST,
    _OP.ATT_READ_BY_GROUP_TYPE_REQUEST, _OP.ATT_WRITE_REQUEST, _OP.ATT_PREPARE_WRITE_REQUEST,
    _OP.ATT_EXECUTE_WRITE_REQUEST, _OP.ATT_READ_MULTIPLE_VARIABLE_REQUEST,
}
COMMANDS = {_OP.ATT_WRITE_COMMAND, _OP.ATT_SIGNED_WRITE_COMMAND}


def att_counts(path: Path) -> tuple[int, int]:
    """(requests, commands) the host sent on the ATT channel, from a btsnoop file."""
    try:
        b = path.read_bytes()
    except OSError:
        return (-1, -1)
    if b[:8] != b"btsnoop\0":
        return (-1, -1)
    off, req, cmd = 16, 0, 0
    while off + 24 <= len(b):
        _, incl, flags, _, _ = struct.unpack(">IIIIQ", b[off:off + 24])
        d = b[off + 24:off + 24 + incl]
        off += 24 + incl
        if flags & 1 or len(d) < 10 or d[0] != 0x02:
            continue
        hf = d[1] | d[2] << 8
        if (hf >> 12) & 0x3 == 0x1:  # continuation fragment
            continue
        cid = d[7] | d[8] << 8
        if cid == 4:
            op = d[9]
            req += op in REQUESTS
            cmd += op in COMMANDS
    return (req, cmd)


def timed(cmd: list[str], env: dict | None, timeout: float = 30) -> dict:
    """Runs cmd; returns wall s, cpu s, peak RSS KiB, exit code, stdout, stderr.

    CPU is the growth of this process's RUSAGE_CHILDREN across the run (runs are
    sequential, so it is this child's alone). Peak RSS comes from GNU time (%M):
    a child forked from this Python process would carry Python's own pre-exec
    footprint in its ru_maxrss."""
    with tempfile.NamedTemporaryFile(prefix="attled-bench-rss-") as rss_file:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        try:
            r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file.name, *cmd], env=env,
                               capture_output=True, text=True, timeout=timeout)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = -9, str(e.stdout or ""), str(e.stderr or "")
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            rss = int(Path(rss_file.name).read_text().split()[-1])
        except (OSError, ValueError, IndexError):
            rss = 0
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall": wall, "cpu": cpu, "rss": rss, "rc": rc, "stdout": out, "stderr": err}


OLD_INTERVAL_MS = 30.0  # the low end of the 30-50 ms attled asked for before issue 11
INTERVAL_RE = re.compile(r"attled: (?:(.+?): )?connect\s.*\binterval ([\d.]+) ms")


def intervals(stderr: str) -> dict[str, float]:
    """Connection interval granted per target label ("" for a single-target run),
    from the progress lines "attled: [LABEL: ]connect ... interval X ms"."""
    return {m.group(1) or "": float(m.group(2)) for m in INTERVAL_RE.finditer(stderr)}


def p90(vals: list[float]) -> float:
    s = sorted(vals)
    return statistics.quantiles(s, n=10)[-1] if len(s) >= 2 else s[0]


def summary(vals: list[float]) -> tuple[float, float, float]:
    s = sorted(vals)
    q = statistics.quantiles(s, n=4) if len(s) >= 4 else [s[0], statistics.median(s), s[-1]]
    return statistics.median(s), q[0], q[-1]


def air_model(round_trips: int, interval_ms: float | None) -> tuple[float, float]:
    """(modelled air time at the granted interval, the same at OLD_INTERVAL_MS), ms."""
    if interval_ms is None or round_trips < 0:
        return (float("nan"), float("nan"))
    return (round_trips * interval_ms, round_trips * OLD_INTERVAL_MS)


def air_line(kind: str, rs: list[dict], links: int = 1) -> str:
    """The "air time model" line of one run kind: medians over its successful runs
    of r["rt"] (round trips), r["air"] and r["old"] (longest link), r["air_sum"]."""
    ok = [r for r in rs if r["air"] == r["air"]]  # not NaN
    if not ok:
        return f"{kind:14} air time model: no successful run"
    med = statistics.median
    ivs = sorted({iv for r in ok for iv in r["ivs"]})
    iv = f"{ivs[0]:.2f}" if len(ivs) == 1 else f"{ivs[0]:.2f}-{ivs[-1]:.2f}"
    air, old = med([r["air"] for r in ok]), med([r["old"] for r in ok])
    if links == 1:
        how = f"{med([r['rt'] for r in ok]):.0f} ATT round trips x {iv} ms = {air:.1f} ms"
    else:
        how = (f"{med([r['rt_max'] for r in ok]):.0f} ATT round trips on the longest of {links} concurrent links"
               f" ({med([r['rt'] for r in ok]):.0f} in all) x {iv} ms = {air:.1f} ms"
               f" (all links: {med([r['air_sum'] for r in ok]):.1f} ms)")
    return f"{kind:14} air time model: {how}; at {OLD_INTERVAL_MS:.0f} ms: {old:.1f} ms (x{old / air:.1f})"


def compare_section(args: argparse.Namespace, work: Path, base_env: dict, figures: dict) -> int:
    """attled cold / warm against Bumble's own central on one CassarTech; returns failures."""
    port = free_port()
    world = WorldProcess(["--host", f"tcp-server:127.0.0.1:{port}", "--device", "CassarTech:pycom:interval=100"], lifetime=1800)
    try:
        if not world.wait_ready(30):
            print("bench: vworld did not start", file=sys.stderr)
            return 1
        transport = f"tcp:127.0.0.1:{port}"
        warm_cache = work / "warm"

        def attled(kind: str, i: int) -> dict:
            cache = warm_cache if kind == "warm" else work / f"cold-{i}"
            cap = work / f"{kind}-{i}.btsnoop"
            env = {**base_env, "XDG_CACHE_HOME": str(cache)}
            r = timed([args.attled, "--transport", transport, "--name", "CassarTech", "--rgb", f"{i % 256},{(i * 7) % 256},1",
                       "--btsnoop", str(cap)], env)
            r["att"] = att_counts(cap)
            r["phases"] = {m.group(1): float(m.group(2)) for m in re.finditer(r"attled: (\w+)\s+([\d.]+) ms", r["stderr"])}
            iv = intervals(r["stderr"]).get("") if r["rc"] == 0 else None
            r["rt"], r["ivs"] = r["att"][0], [iv] if iv is not None else []
            r["air"], r["old"] = air_model(r["rt"], iv)
            return r

        def bumble(i: int) -> dict:
            cap = work / f"bumble-{i}.btsnoop"
            env = module_env({**base_env, "BUMBLE_SNOOPER": f"btsnoop:file:{cap}"})
            r = timed(module_command("attledtools.drivers.bumble_central", "--transport", f"tcp-client:127.0.0.1:{port}",
                                     "--name", "CassarTech", "--rgb", f"{i % 256},3,4"), env, timeout=60)
            r["att"] = att_counts(cap)
            return r

        # Warm the cache (first warm run records the Database Hash).
        for i in range(2):
            r = attled("warm", 1000 + i)
            if r["rc"] != 0:
                print("bench: warm-up failed:\n" + r["stderr"], file=sys.stderr)
                return 1
        results: dict[str, list[dict]] = {"attled cold": [], "attled warm": [], "bumble": []}
        for i in range(args.n):
            results["attled cold"].append(attled("cold", i))
            results["attled warm"].append(attled("warm", i))
            results["bumble"].append(bumble(i))
        failures = {k: sum(r["rc"] != 0 for r in v) for k, v in results.items()}

        base = {m: summary([r[m] for r in results["bumble"]])[0] for m in ("wall", "cpu", "rss")}
        print(f"\nattled vs Bumble, {args.n} runs each, alternating (median [p25-p75]; ratio = median / Bumble's median)\n")
        print(f"{'':12} {'wall ms':>24} {'cpu ms':>22} {'peak RSS MiB':>24} {'ATT req+cmd':>12} {'failed':>6}")
        for k, rs in results.items():
            w, c, m = (summary([r[x] for r in rs]) for x in ("wall", "cpu", "rss"))
            att = statistics.median([r["att"][0] for r in rs]), statistics.median([r["att"][1] for r in rs])
            print(f"{k:12} {w[0]*1000:7.1f} [{w[1]*1000:6.1f}-{w[2]*1000:6.1f}] x{w[0]/base['wall']:.3f}"
                  f" {c[0]*1000:6.1f} [{c[1]*1000:5.1f}-{c[2]*1000:5.1f}] x{c[0]/base['cpu']:.3f}"
                  f" {m[0]/1024:6.1f} [{m[1]/1024:5.1f}-{m[2]/1024:5.1f}] x{m[0]/base['rss']:.3f}"
                  f" {att[0]:>5.0f}+{att[1]:<5.0f} {failures[k]:>6}")
            figures[k] = {"wall_ms": w[0] * 1000, "cpu_ms": c[0] * 1000, "rss_kib": m[0], "att_requests": att[0],
                          "att_commands": att[1], "wall_ratio": w[0] / base["wall"], "cpu_ratio": c[0] / base["cpu"],
                          "rss_ratio": m[0] / base["rss"], "failed": failures[k]}
        for k in ("attled cold", "attled warm"):
            phases: dict[str, list[float]] = {}
            for r in results[k]:
                for p, v in r["phases"].items():
                    phases.setdefault(p, []).append(v)
            print(f"\n{k} phases (median ms): " + ", ".join(f"{p} {statistics.median(v):.1f}" for p, v in phases.items()))
            figures[k]["phases_ms"] = {p: statistics.median(v) for p, v in phases.items()}
        print()
        for k in ("attled cold", "attled warm"):
            print(air_line(k, results[k]))
            ok = [r for r in results[k] if r["air"] == r["air"]]
            if ok:
                figures[k]["air_ms"] = statistics.median([r["air"] for r in ok])
                figures[k][f"air_ms_at_{OLD_INTERVAL_MS:.0f}"] = statistics.median([r["old"] for r in ok])
        return sum(failures.values())
    finally:
        world.stop()


LAMPS = (("Lamp1", "pycom"), ("Lamp2", "particle"), ("Lamp3", "pycom"))


def multi_section(args: argparse.Namespace, work: Path, base_env: dict, figures: dict) -> int:
    """1 vs 3 devices (issue 11): one-device and three-device cold sets, alternating,
    against one world of three lamps; returns the number of failed runs."""
    port = free_port()
    world_args = ["--host", f"tcp-server:127.0.0.1:{port}"]
    for name, profile in LAMPS:
        world_args += ["--device", f"{name}:{profile}:interval=100"]
    world = WorldProcess(world_args, lifetime=1800)
    try:
        if not world.wait_ready(30):
            print("bench: vworld (three lamps) did not start", file=sys.stderr)
            return 1
        transport = f"tcp:127.0.0.1:{port}"

        def run(names: list[str], i: int) -> dict:
            env = {**base_env, "XDG_CACHE_HOME": str(work / f"multi-{len(names)}-{i}")}
            targets = [x for n in names for x in ("--name", n)]
            r = timed([args.attled, "--transport", transport, *targets, "--rgb", f"{i % 256},{(i * 3) % 256},2",
                       "--no-cache", "--json"], env)
            try:
                docs = [json.loads(line) for line in r["stdout"].splitlines() if line.strip()]
            except json.JSONDecodeError:
                docs = []
            ivs = intervals(r["stderr"])
            if len(names) == 1:  # a single target's progress lines and JSON object carry no label
                ivs = {names[0]: ivs[""]} if "" in ivs else ivs
                for d in docs:
                    d.setdefault("target", names[0])
            r["ok"] = (r["rc"] == 0 and sorted(d.get("target", "") for d in docs) == sorted(names)
                       and all(d.get("ok") for d in docs) and all(n in ivs for n in names))
            if not r["ok"]:
                r["rt"] = r["rt_max"] = -1
                r["ivs"], r["air"], r["old"], r["air_sum"] = [], float("nan"), float("nan"), float("nan")
                return r
            links = [(d["att_transactions"], ivs[d["target"]]) for d in docs]
            r["rt"] = sum(rt for rt, _ in links)
            r["rt_max"] = max(rt for rt, _ in links)
            r["ivs"] = [iv for _, iv in links]
            r["air"] = max(rt * iv for rt, iv in links)
            r["air_sum"] = sum(rt * iv for rt, iv in links)
            r["old"] = max(rt * OLD_INTERVAL_MS for rt, _ in links)
            r["total_ms"] = max(d.get("total_ms", 0) for d in docs)
            return r

        names = [n for n, _ in LAMPS]
        kinds = {"1 device": names[:1], "3 devices": names}
        results: dict[str, list[dict]] = {k: [] for k in kinds}
        for i in range(args.n):
            for k, targets in kinds.items():
                results[k].append(run(targets, i))
        failures = {k: sum(not r["ok"] for r in v) for k, v in results.items()}
        for k, rs in results.items():
            bad = next((r for r in rs if not r["ok"]), None)
            if bad is not None:
                print(f"bench: {k}: a failed run (exit {bad['rc']}):\n{bad['stdout']}{bad['stderr']}", file=sys.stderr)

        print(f"\n1 vs 3 devices, {args.n} runs each, alternating, cold (--no-cache); one world: "
              + ", ".join(f"{n} {p}" for n, p in LAMPS) + ", 100 ms advertising\n")
        print(f"{'':12} {'wall ms median [p25-p75]':>27} {'p90':>7} {'attled total_ms':>16} {'ATT round trips':>16} {'failed':>6}")
        walls: dict[str, tuple[float, float]] = {}
        for k, rs in results.items():
            ok = [r for r in rs if r["ok"]] or rs
            w = summary([r["wall"] for r in ok])
            w90 = p90([r["wall"] for r in ok])
            walls[k] = (w[0], w90)
            total = statistics.median([r.get("total_ms", float("nan")) for r in ok])
            rt = statistics.median([r["rt"] for r in ok])
            print(f"{k:12} {w[0]*1000:9.1f} [{w[1]*1000:6.1f}-{w[2]*1000:6.1f}] {w90*1000:9.1f} {total:16.1f} {rt:16.0f} {failures[k]:>6}")
            figures[k] = {"wall_ms": w[0] * 1000, "wall_p90_ms": w90 * 1000, "attled_total_ms": total,
                          "att_round_trips": rt, "failed": failures[k]}
        ratio, ratio90 = walls["3 devices"][0] / walls["1 device"][0], walls["3 devices"][1] / walls["1 device"][1]
        verdict = "within" if ratio <= 1.5 else "ABOVE"
        print(f"\nratio 3 devices / 1 device: median x{ratio:.2f}, p90 x{ratio90:.2f} ({verdict} the issue's target of 1.5x)")
        figures["1 vs 3 devices"] = {"wall_ratio": ratio, "wall_p90_ratio": ratio90}
        print()
        for k, rs in results.items():
            print(air_line(k, rs, links=len(kinds[k])))
            ok = [r for r in rs if r["ok"]]
            if ok:
                figures[k]["air_ms"] = statistics.median([r["air"] for r in ok])
                figures[k]["air_ms_all_links"] = statistics.median([r["air_sum"] for r in ok])
                figures[k][f"air_ms_at_{OLD_INTERVAL_MS:.0f}"] = statistics.median([r["old"] for r in ok])
        return sum(failures.values())
    finally:
        world.stop()


def binary_section(args: argparse.Namespace, figures: dict) -> None:
    """The binary's size and start-up time, and parser throughput (attled-bench)."""
    size = os.path.getsize(args.attled)
    starts = [timed([args.attled, "--version"], None)["wall"] for _ in range(50)]
    start_rss = timed([args.attled, "--version"], None)["rss"]
    label = "release binary" if "/release/" in args.attled else "binary (not a release build)"
    print(f"\n{label}: {size/1e6:.2f} MB ({args.attled}), start-up {statistics.median(starts)*1000:.2f} ms median of 50, "
          f"peak RSS {start_rss/1024:.1f} MiB for --version")
    figures["binary"] = {"bytes": size, "startup_ms": statistics.median(starts) * 1000, "rss_kib": start_rss}
    if os.path.exists(args.bench_bin):
        print("\nparser throughput (one core):")
        out = subprocess.run([args.bench_bin, "1000000"], capture_output=True, text=True, timeout=120).stdout
        print(out.rstrip())
        figures["parsers"] = out


def gateway_section(args: argparse.Namespace, figures: dict) -> int:
    """attled gateway against the Bumble-and-paho reference (gatewaybench.py); returns failures."""
    from attledtools.bench import gatewaybench
    return gatewaybench.run(gatewaybench.section_args(args.attled, args.gateway_n), figures)


def gateway_air_section(args: argparse.Namespace, figures: dict) -> int:
    """The air-time model of a gateway command on a fresh and an idle link (gatewayair.py); returns failures."""
    from attledtools.bench import gatewayair
    return gatewayair.run(args.attled, figures)


SECTIONS = ("compare", "multi", "binary", "gateway", "gateway-air")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attled", default=str(ROOT / ".build/release/attled"))
    ap.add_argument("--bench-bin", default=str(ROOT / ".build/release/attled-bench"))
    ap.add_argument("-n", type=int, default=20, help="runs of each kind (default 20)")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma-separated: compare (attled cold/warm vs Bumble), multi (1 vs 3 devices), "
                         "binary (size, start-up, parsers), gateway (MQTT gateway latency vs a Bumble+paho "
                         "reference); default: all")
    ap.add_argument("--gateway-n", type=int, default=300, help="gateway: commands per gateway (default 300)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown or not sections:
        ap.error(f"--sections: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(SECTIONS)}")
    if not os.path.exists(args.attled):
        ap.error(f"no attled binary at {args.attled} (make release, or --attled .build/debug/attled)")

    work = Path(tempfile.mkdtemp(prefix="attled-bench-"))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("BUMBLE_")}
    base_env["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="attled-bench-state-")  # no bonds from elsewhere
    figures: dict[str, dict] = {}
    failed = 0
    try:
        if "compare" in sections:
            failed += compare_section(args, work, base_env, figures)
        if "multi" in sections:
            failed += multi_section(args, work, base_env, figures)
        if "binary" in sections:
            binary_section(args, figures)
        if "gateway" in sections:
            failed += gateway_section(args, figures)
        if "gateway-air" in sections:
            failed += gateway_air_section(args, figures)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
        return 0 if not failed else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
