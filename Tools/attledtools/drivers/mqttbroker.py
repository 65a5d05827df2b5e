"""A private mosquitto for the gateway's tests, benchmark, soak and kernel VM test.

``Broker(workdir)`` writes a configuration for a free loopback port (no
persistence, so a killed broker forgets retained messages), ``start()`` runs
Debian's ``mosquitto`` and waits until it listens, ``kill()`` is SIGKILL (no
goodbye), ``stop()`` SIGTERM then SIGKILL. ``extra`` adds configuration lines
(TLS, a password file); ``nodelay`` sets ``set_tcp_nodelay``.

``Watcher(port)`` is the judging client: paho-mqtt subscribed to ``#``, every
message kept in order (``Msg``), waits with deadlines.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from attledtools.drivers.worldproc import free_port

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.subscribeoptions import SubscribeOptions

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


class Broker:
    """mosquitto on 127.0.0.1:port, its log in ``workdir/mosquitto.log``."""

    def __init__(self, workdir: Path, *, port: int | None = None, anonymous: bool = True,
                 extra: str = "", nodelay: bool | None = None, log: bool = True):
        self.port = port or free_port()
        self.conf = workdir / "mosquitto.conf"
        lines = [f"listener {self.port} 127.0.0.1", f"allow_anonymous {'true' if anonymous else 'false'}",
                 "persistence false"]
        if nodelay is not None:
            lines.append(f"set_tcp_nodelay {'true' if nodelay else 'false'}")
        lines += ["log_dest stderr", "log_type error", "log_type warning", "log_type notice", "log_type information"] \
            if log else ["log_dest none"]
        self.conf.write_text("\n".join(lines) + "\n" + extra)
        self.log = workdir / "mosquitto.log"
        self.p: subprocess.Popen | None = None

    def start(self, timeout: float = 10) -> None:
        """Starts mosquitto; returns once it accepts TCP connections.
        Raises RuntimeError (with its log) when it exits or never listens."""
        with open(self.log, "ab") as log:
            self.p = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            if self.p.poll() is not None:
                raise RuntimeError(f"mosquitto exited ({self.p.returncode}):\n{self.log.read_text()[-4000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mosquitto not listening on {self.port}:\n{self.log.read_text()[-4000:]}") from None
                time.sleep(0.02)  # polling for the listener

    def kill(self) -> None:
        """SIGKILL: no clean goodbye, retained messages lost (no persistence)."""
        if self.p is not None and self.p.poll() is None:
            self.p.kill()
            self.p.wait(5)

    def stop(self) -> None:
        if self.p is not None and self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


@dataclass
class Msg:
    """One MQTT message as a watching client received it."""

    at: float  # time.monotonic() on arrival
    topic: str
    payload: bytes
    retain: bool = False

    @property
    def text(self) -> str:
        return self.payload.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.payload)


# -----------------------------------------------------------------------------
class Watcher:
    """paho-mqtt (callback API 2, MQTT 5) subscribed to ``topics`` (default ``#``);
    every message kept, in order. Up to 100 QoS 1 publishes in flight (the
    soak's bursts go through ``c.publish`` without waiting for each PUBACK)."""

    def __init__(self, port: int, ca: Path | None = None, auth: tuple[str, str] | None = None, topics: str = "#"):
        """Connects (over TLS with the CA ``ca``, with ``auth`` = user, password, when given)."""
        self.messages: list[Msg] = []
        self.cond = threading.Condition()
        self.connects = 0
        self.connected = False
        self.topics = topics
        self.c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"gwtest-{os.getpid()}-{port}",
                             protocol=mqtt.MQTTv5)
        if ca is not None:
            self.c.tls_set(ca_certs=str(ca))
        if auth is not None:
            self.c.username_pw_set(*auth)
        self.c.reconnect_delay_set(min_delay=0.1, max_delay=0.5)
        self.c.max_inflight_messages_set(100)
        self.c.on_connect = self._on_connect
        self.c.on_disconnect = self._on_disconnect
        self.c.on_message = self._on_message
        self.c.connect("127.0.0.1", port, keepalive=30)
        self.c.loop_start()
        self.wait_connects(1, timeout=10)

    def _on_connect(self, client, userdata, flags, reason_code, properties):
        if reason_code.is_failure:
            return
        # retainAsPublished: the retain flag as the gateway set it, also on live messages.
        client.subscribe(self.topics, options=SubscribeOptions(qos=1, retainAsPublished=True))
        with self.cond:
            self.connects += 1
            self.connected = True
            self.cond.notify_all()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        with self.cond:
            self.connected = False
            self.cond.notify_all()

    def _on_message(self, client, userdata, message):
        with self.cond:
            self.messages.append(Msg(time.monotonic(), message.topic, bytes(message.payload), bool(message.retain)))
            self.cond.notify_all()

    def mark(self) -> int:
        with self.cond:
            return len(self.messages)

    def find(self, topic: str | None = None, pred=None, since: int = 0) -> list[Msg]:
        with self.cond:
            return [m for m in self.messages[since:]
                    if (topic is None or m.topic == topic) and (pred is None or pred(m))]

    def wait(self, topic: str | None = None, pred=None, since: int = 0, timeout: float = 10) -> Msg:
        """The first message from index ``since`` on ``topic`` matching ``pred``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.messages[since:]:
                    if (topic is None or m.topic == topic) and (pred is None or pred(m)):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    recent = "\n".join(f"  {m.topic} {'R ' if m.retain else ''}{m.text[:160]}"
                                       for m in self.messages[-25:])
                    raise AssertionError(f"no MQTT message on {topic!r} matching within {timeout} s; "
                                         f"recent:\n{recent}")
                self.cond.wait(left)

    def wait_text(self, topic: str, text: str, since: int = 0, timeout: float = 10) -> Msg:
        return self.wait(topic, lambda m: m.text == text, since, timeout)

    def wait_connects(self, n: int, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.connects < n:
                left = deadline - time.monotonic()
                assert left > 0, f"the test's MQTT client did not reconnect ({self.connects} connects)"
                self.cond.wait(left)

    def wait_connected(self, timeout: float) -> bool:
        """Until connected (again); False at the deadline."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.connected:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def publish(self, topic: str, payload: str | bytes, retain: bool = False) -> None:
        info = self.c.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(10)
        assert info.is_published(), f"publish to {topic} not acknowledged"

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()
