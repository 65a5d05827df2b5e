"""The gateway soak's figures (the --json output) and its printed report."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from attledtools.soak.gatewaymodel import DEVICES, LAMPS


@dataclass
class Figures:
    seed: int
    commands: int = 0
    commands_chaos: int = 0
    commands_final_phase: int = 0
    per_device: dict = field(default_factory=lambda: {n: 0 for n, _, _ in DEVICES})
    publish_failures: int = 0
    device_restarts: list = field(default_factory=list)  # {device, kill, at, down_s, reconnect_s}
    device_restarts_planned: list = field(default_factory=list)
    broker_restarts: list = field(default_factory=list)  # {at, down_s, reconnect_s}
    wall_s: float = 0.0
    rss_kb: dict = field(default_factory=dict)
    fds: dict = field(default_factory=dict)
    final: dict = field(default_factory=dict)
    gateway_log: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)


def report(f: Figures) -> None:
    print("\n== gateway soak ==")
    print(f"seed {f.seed}; wall time {f.wall_s} s (command stream {f.final.get('stream_s')} s)")
    print(f"commands: {f.commands} ({f.commands_chaos} with restarts, {f.commands_final_phase} after the last); "
          + ", ".join(f"{k} {v}" for k, v in f.per_device.items()))
    dr = [r["reconnect_s"] for r in f.device_restarts if r["reconnect_s"] is not None]
    br = [r["reconnect_s"] for r in f.broker_restarts if r["reconnect_s"] is not None]
    print(f"device restarts: {len(f.device_restarts)} "
          + " ".join(f"[{r['device']} {r['signal']} @{r['at_s']}s down {r['down_s']}s back {r['reconnect_s']}s]"
                     for r in f.device_restarts))
    print(f"broker restarts: {len(f.broker_restarts)} "
          + " ".join(f"[@{r['at_s']}s down {r['down_s']}s reconnected {r['reconnect_s']}s]" for r in f.broker_restarts))
    if dr:
        print(f"device reconnect (process ready -> online): median {statistics.median(dr):.2f} s, max {max(dr):.2f} s")
    if br:
        print(f"broker reconnect (broker listening -> gateway connected): median {statistics.median(br):.2f} s, "
              f"max {max(br):.2f} s")
    for name in LAMPS:
        r = f.final.get(name)
        if r:
            print(f"{name}: device {r['device']} (expected {r['expected_device']}), {r['commands']} commands -> "
                  f"{r['state_messages']} state messages, in order: {r['in_order_subsequence']}, "
                  f"retained ok: {r.get('retained_state') == r['expected_state']}")
    if "Harness" in f.final:
        h = f.final["Harness"]
        print(f"Harness: {h['presses']} presses after the last restart, writes {h['writes']} (expected {h['expected_writes']})")
    if f.rss_kb:
        r = f.rss_kb
        print(f"RSS (KiB, {r['samples']} samples): first {r['first']}, median {r['median']}, last {r['last']}, "
              f"max {r['max']}; first third {r['first_third_mean']} -> last third {r['last_third_mean']} "
              f"({r['growth_pct']:+.1f} %), slope {r['slope_kb_per_min']} KiB/min")
    print(f"open descriptors: {f.fds}")
    print(f"gateway log: {f.gateway_log}")
    print("RESULT: " + ("PASS" if not f.failures else "FAIL\n  " + "\n  ".join(f.failures)))
