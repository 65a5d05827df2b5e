#!/usr/bin/env python3
"""make bench: attled against Bumble, side by side, on the same virtual device.

Starts the virtual controllers and the virtual CassarTech LED (pycom profile,
100 ms advertising), then runs, alternating, N times each:
  - attled cold:  `attled --name CassarTech --rgb ...` with an empty cache,
  - attled warm:  the same with a warm cache (remembered address and handles),
  - bumble:       Tools/bumble_central.py, the same job done the ordinary way
                  with Bumble's own API (scan, connect, discover, write, disconnect).
For each it prints the median and spread of whole-process wall time, CPU time
(user+sys), peak RSS and the number of ATT transactions (from each process's
own btsnoop capture), plus attled's phase times, and every figure as a ratio
against the Bumble run measured in the same invocation (these machines are
noisy). Then the release binary's size and start-up time, and parser
throughput (attled-bench).
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

from worldproc import WorldProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
REQUESTS = {0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20}
COMMANDS = {0x52, 0xD2}


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


def summary(vals: list[float]) -> tuple[float, float, float]:
    s = sorted(vals)
    q = statistics.quantiles(s, n=4) if len(s) >= 4 else [s[0], statistics.median(s), s[-1]]
    return statistics.median(s), q[0], q[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--attled", default=str(ROOT / ".build/release/attled"))
    ap.add_argument("--bench-bin", default=str(ROOT / ".build/release/attled-bench"))
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="attled-bench-"))
    port = free_port()
    world = WorldProcess(["--host", f"tcp-server:127.0.0.1:{port}", "--device", "CassarTech:pycom:interval=100"], lifetime=1800)
    try:
        if not world.wait_ready(30):
            print("bench: vworld did not start", file=sys.stderr)
            return 1
        transport = f"tcp:127.0.0.1:{port}"
        warm_cache = work / "warm"
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("BUMBLE_")}

        def attled(kind: str, i: int) -> dict:
            cache = warm_cache if kind == "warm" else work / f"cold-{i}"
            cap = work / f"{kind}-{i}.btsnoop"
            env = {**base_env, "XDG_CACHE_HOME": str(cache)}
            r = timed([args.attled, "--transport", transport, "--name", "CassarTech", "--rgb", f"{i % 256},{(i * 7) % 256},1",
                       "--btsnoop", str(cap)], env)
            r["att"] = att_counts(cap)
            r["phases"] = {m.group(1): float(m.group(2)) for m in re.finditer(r"attled: (\w+)\s+([\d.]+) ms", r["stderr"])}
            return r

        def bumble(i: int) -> dict:
            cap = work / f"bumble-{i}.btsnoop"
            env = {**base_env, "BUMBLE_SNOOPER": f"btsnoop:file:{cap}"}
            r = timed([sys.executable, str(ROOT / "Tools/bumble_central.py"), "--transport", f"tcp-client:127.0.0.1:{port}",
                       "--name", "CassarTech", "--rgb", f"{i % 256},3,4"], env, timeout=60)
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
        figures: dict[str, dict] = {}
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

        size = os.path.getsize(args.attled)
        starts = [timed([args.attled, "--version"], None)["wall"] for _ in range(50)]
        start_rss = timed([args.attled, "--version"], None)["rss"]
        print(f"\nrelease binary: {size/1e6:.2f} MB ({args.attled}), start-up {statistics.median(starts)*1000:.2f} ms median of 50, "
              f"peak RSS {start_rss/1024:.1f} MiB for --version")
        figures["binary"] = {"bytes": size, "startup_ms": statistics.median(starts) * 1000, "rss_kib": start_rss}
        if os.path.exists(args.bench_bin):
            print("\nparser throughput (one core):")
            out = subprocess.run([args.bench_bin, "1000000"], capture_output=True, text=True, timeout=120).stdout
            print(out.rstrip())
            figures["parsers"] = out
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
        return 0 if not any(failures.values()) else 1
    finally:
        world.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
