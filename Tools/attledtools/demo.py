"""make demo: attled against the built-in virtual CassarTech LED.

Starts vworld (attledtools.drivers.vworld: a Bumble virtual controller for
attled on a local TCP port, and the virtual CassarTech LED, pycom profile, on
the same virtual air), runs `attled scan`, then the main job
`attled --transport tcp:... --name CassarTech --rgb 255,0,0`, and shows the
LED's new state as the virtual device reports it. Every wait has a deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import sys

from attledtools import REPO_ROOT
from attledtools.drivers.worldproc import WorldProcess, free_port

ROOT = REPO_ROOT


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--attled", default=str(ROOT / ".build/debug/attled"))
    ap.add_argument("--rgb", default="255,0,0")
    ap.add_argument("--profile", default="pycom", choices=["pycom", "particle", "harness"])
    args = ap.parse_args()

    port = free_port()
    world = WorldProcess(["--host", f"tcp-server:127.0.0.1:{port}", "--device", f"CassarTech:{args.profile}"], lifetime=120)
    try:
        if not world.wait_ready(20):
            print("demo: the virtual controller did not start within 20 s", file=sys.stderr)
            return 1
        transport = f"tcp:127.0.0.1:{port}"
        print(f"== virtual CassarTech LED ({args.profile} profile) on a Bumble virtual controller at {transport}\n")
        print(f"$ attled scan --transport {transport} --timeout 1")
        sys.stdout.flush()
        subprocess.run([args.attled, "scan", "--transport", transport, "--timeout", "1"], timeout=30)
        cmd = [args.attled, "--transport", transport, "--name", "CassarTech", "--rgb", args.rgb]
        # A cache of the demo's own: the first run is cold (scan, discovery), the second warm.
        env = {**os.environ, "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="attled-demo-"), "XDG_STATE_HOME": tempfile.mkdtemp(prefix="attled-demo-state-")}
        for label in ("cold: scan, connect, discover, write", "warm: remembered address and handles"):
            print(f"\n# {label}\n$ {' '.join(['attled'] + cmd[1:])}")
            sys.stdout.flush()
            r = subprocess.run(cmd, timeout=30, env=env)
            if r.returncode != 0:
                print(f"demo: attled exited {r.returncode}", file=sys.stderr)
                return r.returncode
            world.wait_for(lambda e: e.get("event") == "advertising", 5, since=len(world.events))
        # The LED's state after the run, once the link is down.
        world.wait_for(lambda e: e.get("event") == "disconnected", 5)
        events = list(world.events)
        states = [e for e in events if e.get("event") == "state"]
        if not states:
            print("demo: the virtual LED reported no change", file=sys.stderr)
            return 1
        last = states[-1]
        print(f"\n== the virtual LED reports: {json.dumps({k: v for k, v in last.items() if k != 't'})}")
        return 0
    finally:
        world.stop()


if __name__ == "__main__":
    sys.exit(main())
