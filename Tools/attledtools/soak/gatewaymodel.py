"""The gateway soak's devices, topics and commands. What a command does to a
lamp is attledtools.halight's Light (attled's LightState, HALight.swift)."""

from __future__ import annotations

import random

PREFIX = "attled"

# name, profile, address (static random, fixed across restarts)
DEVICES = [
    ("Lamp-P", "pycom", "C0:11:22:33:44:01"),
    ("Lamp-X", "particle", "C0:11:22:33:44:02"),
    ("Harness", "harness", "C0:11:22:33:44:03"),
]
LAMPS = ["Lamp-P", "Lamp-X"]
PRESS_BYTES = {1: ("01", "00"), 2: ("03", "04")}


def node(address: str) -> str:
    return address.replace(":", "").lower()


def topic(name: str, leaf: str) -> str:
    addr = next(a for n, _, a in DEVICES if n == name)
    return f"{PREFIX}/{node(addr)}/{leaf}"


def random_light_command(rng: random.Random, full: bool = False, absolute: bool = False) -> dict:
    """A random Home Assistant light command; absolute (--absolute): every command
    carries the whole state (no bare ON / OFF / brightness only)."""
    def colour() -> dict:
        return {"r": rng.randrange(256), "g": rng.randrange(256), "b": rng.randrange(256)}
    x = 0.0 if full else rng.random()
    if x < 0.70 or (absolute and x >= 0.80):
        return {"state": "ON", "brightness": rng.randrange(1, 256), "color": colour()}
    if absolute:
        return {"state": "OFF", "brightness": rng.randrange(1, 256), "color": colour()}
    if x < 0.80:
        return {"state": "OFF"}
    if x < 0.90:
        return {"state": "ON"}
    return {"state": "ON", "brightness": rng.randrange(1, 256)}
