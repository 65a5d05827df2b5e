"""The gateway soak's helper processes: a device in a vworld process of its own,
and a fresh MQTT client reading what is retained."""

from __future__ import annotations

import os
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from attledtools.drivers.worldproc import WorldProcess


# -----------------------------------------------------------------------------
# Processes
# -----------------------------------------------------------------------------
def retained(port: int, topics: list[str], timeout: float = 5) -> dict[str, str]:
    """What a fresh client gets as retained on ``topics``."""
    got: dict[str, str] = {}
    cond = threading.Condition()
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"gwsoak-retained-{os.getpid()}")

    def on_connect(client, userdata, flags, rc, props):
        for t in topics:
            client.subscribe(t, qos=1)

    def on_message(client, userdata, m):
        if m.retain:
            with cond:
                got[m.topic] = bytes(m.payload).decode()
                cond.notify_all()
    c.on_connect = on_connect
    c.on_message = on_message
    c.connect("127.0.0.1", port)
    c.loop_start()
    deadline = time.monotonic() + timeout
    with cond:
        while len(got) < len(topics) and time.monotonic() < deadline:
            cond.wait(0.1)
    c.disconnect()
    c.loop_stop()
    return got


class Device:
    """One device in its own vworld process on the air's host controller ``host``."""

    def __init__(self, name: str, profile: str, address: str, bumble_transport: str):
        self.name, self.profile, self.address, self.transport = name, profile, address, bumble_transport
        self.world: WorldProcess | None = None
        self.worlds: list[WorldProcess] = []
        self.starts = 0

    def start(self) -> float:
        spec = f"{self.name}:{self.profile}:addr={self.address}"
        self.world = WorldProcess(["--device", spec, "--peripheral-transport", self.transport], lifetime=3600)
        self.worlds.append(self.world)
        if not self.world.wait_ready(30):
            raise RuntimeError(f"{self.name}: vworld did not start")
        self.starts += 1
        return time.monotonic()

    def stop(self, kill: bool) -> None:
        assert self.world is not None
        if kill:
            self.world.proc.kill()
            self.world.proc.wait(5)
        self.world.stop()
