"""make soak: 500 runs in a row against the virtual devices, nothing lost.

Starts one virtual world with the three devices (pycom "Lamp-P", particle
"Lamp-X", harness "Harness") and runs attled N times, cycling the profiles:
a random colour for the two RGB lamps, a random button command for the
harness. Every run must exit 0, and at the end each device's reported state
must equal the last thing requested of it. Prints the success count and the
per-run wall time distribution. The cache is used as a user would (so most
runs are warm).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

from attledtools import REPO_ROOT
from attledtools.drivers.worldproc import WorldProcess, free_port

ROOT = REPO_ROOT


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--attled", default=str(ROOT / ".build/debug/attled"))
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    port = free_port()
    world = WorldProcess(["--host", f"tcp-server:127.0.0.1:{port}", "--device", "Lamp-P:pycom",
                          "--device", "Lamp-X:particle", "--device", "Harness:harness"], lifetime=3600)
    wait_for = world.wait_for

    cache = tempfile.mkdtemp(prefix="attled-soak-")
    env = {**os.environ, "XDG_CACHE_HOME": cache, "XDG_STATE_HOME": tempfile.mkdtemp(prefix="attled-soak-state-")}
    try:
        if not world.wait_ready(30):
            print("soak: vworld did not start", file=sys.stderr)
            return 1
        transport = f"tcp:127.0.0.1:{port}"
        times: list[float] = []
        failures: list[str] = []
        last: dict[str, object] = {}
        buttons = [0, 0]
        for i in range(args.n):
            kind = ("Lamp-P", "Lamp-X", "Harness")[i % 3]
            if kind == "Harness":
                cmd = rng.choice([1, 0, 3, 4])
                argv = [args.attled, "-i", transport, "--name", kind, "send", "--value", f"{cmd:02x}", "-q"]
                if cmd in (1, 0):
                    buttons[0] = 1 if cmd == 1 else 0
                else:
                    buttons[1] = 1 if cmd == 3 else 0
                last[kind] = list(buttons)
            else:
                rgb = [rng.randrange(256) for _ in range(3)]
                argv = [args.attled, "-i", transport, "--name", kind, "--rgb", ",".join(map(str, rgb)), "-q"]
                last[kind] = rgb
            mark = len(world.events)
            t0 = time.monotonic()
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
            times.append(time.monotonic() - t0)
            if r.returncode != 0:
                failures.append(f"run {i} ({kind}): exit {r.returncode}: {r.stderr.strip()}")
            # The device is advertising again (the link is down) before the next run.
            wait_for(lambda e, k=kind: e.get("event") == "advertising" and e.get("device") == k, 5, since=mark)
        ok = args.n - len(failures)
        # Final state of each device equals the last request.
        final_ok = True
        for kind, want in last.items():
            key = "buttons" if kind == "Harness" else "rgb"
            got = wait_for(lambda e, k=kind: e.get("event") == "state" and e.get("device") == k, 5)
            state = got.get(key) if got else None
            match = state == want
            final_ok &= match
            print(f"{kind}: final state {state}, last requested {want}: {'ok' if match else 'MISMATCH'}")
        q = statistics.quantiles(times, n=100)
        print(f"\nsoak: {ok}/{args.n} runs succeeded; per-run wall time: median {statistics.median(times)*1000:.1f} ms, "
              f"p10 {q[9]*1000:.1f}, p90 {q[89]*1000:.1f}, p99 {q[98]*1000:.1f}, max {max(times)*1000:.1f} ms")
        for f in failures[:20]:
            print("  " + f)
        print(f"{ok + (1 if final_ok else 0)} passed, {len(failures) + (0 if final_ok else 1)} failed")
        return 0 if not failures and final_ok else 1
    finally:
        world.stop()


if __name__ == "__main__":
    sys.exit(main())
