"""Fixtures for integration tests of attled against a virtual BLE world.

The world is vworld (Tools/attledtools/drivers/vworld.py): Bumble virtual
controllers on one in-process link, some served as H4 to attled (TCP, Unix
socket or pty), plus LED peripherals (pycom / particle / harness) that report
everything they see as JSON events.  A fresh world is started for every test.

API
---
``world(devices=[...], hosts=["tcp"], legacy=False, extra_args=[])``  (fixture,
a factory) starts a world and waits for its ready line; returns a ``World``:

    w = world(devices=["CassarTech:pycom"], hosts=["tcp"])
    r = run_attled(["--transport", w.transport(), "--name", "CassarTech",
                    "--rgb", "255,0,0"])
    assert r.returncode == 0, r.stdout + r.stderr
    w.wait_event({"event": "state", "device": "CassarTech", "rgb": [255, 0, 0]})
    w.wait_event({"event": "disconnected", "device": "CassarTech"})

Controllers: a test runs on Bumble's virtual controllers unless it is marked
``@pytest.mark.controllers``: then it runs twice, on Bumble's and on Android's
Root Canal (ids ``[bumble]`` / ``[rootcanal]``), and the ``controller`` fixture
says which. A Root Canal world has tcp hosts only, host_addresses of None
(Root Canal picks them), about 45 ms per HCI command and ATT round trip, and
none of Bumble's quirks (its accept list works, a cancelled connect ends).

``World``:
    .transport(i=0)     attled transport spec of host i:
                        "tcp:127.0.0.1:PORT" | "unix:/path" | "serial:/path"
    .bumble_transport(i=0)  the same for a Bumble host ("tcp-client:...",
                        "unix:...", "serial:...")
    .ready              the parsed ready line (dict); .devices = ready["devices"]
    .device(name)       ready info of one device: address, handles, adv_data ...
    .events             list of all events so far (dicts, arrival order)
    .mark()             current length of .events, for ``since=``
    .wait_event(pred, timeout=10, since=0)
                        first event (from index ``since``) matching ``pred``,
                        waiting up to ``timeout`` s; ``pred`` is a callable
                        or a dict matched as a subset (see ``matches``).
                        Raises AssertionError (with the recent events) on timeout.
    .wait_events(pred, count, timeout=10, since=0)
                        wait until ``count`` events match; returns them all
    .find(pred, since=0)  all matching events so far (no waiting)
    .stderr             vworld's stderr so far
    .hosts_gone(since, count=1)  on Root Canal, wait until the host clients
                        since that mark have left (see the method)
    .stop(timeout=5)    SIGTERM, then SIGKILL after timeout; returns exit code

``run_attled(args, timeout=20, env=None)`` (plain function and fixture) runs
the attled binary (``ATTLED``: $ATTLED_BIN or <repo>/.build/debug/attled)
with a hard timeout; returns CompletedProcess(text, stdout and stderr
captured).  ``env`` entries are added to the current environment.

``run_bumble_central(args, timeout=20)`` runs the reference central
(attledtools.drivers.bumble_central) the same way.

Every wait has a deadline; nothing relies on sleeps.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from attledtools import module_command  # installed in the venv (Tools/pyproject.toml)
from attledtools.drivers.attledproc import AttledProcess
from attledtools.drivers.worldproc import VWORLD, WorldProcess  # noqa: F401  (VWORLD for the tests)

REPO_ROOT = Path(__file__).resolve().parents[2]
BUMBLE_CENTRAL = "attledtools.drivers.bumble_central"  # a module: module_command(BUMBLE_CENTRAL, ...)
PYTHON = sys.executable  # the interpreter running pytest (the venv with bumble)
ATTLED = Path(os.environ.get("ATTLED_BIN") or (REPO_ROOT / ".build" / "debug" / "attled"))

READY_TIMEOUT = 15.0  # seconds for vworld to print its ready line
WORLD_LIFETIME = 600  # vworld exits by itself after this many seconds, whatever happens

Pred = Callable[[dict], bool] | dict


def matches(event: dict, pattern: dict) -> bool:
    """True if every key of ``pattern`` is in ``event`` with an equal value.

    A pattern value may also be a callable, applied to the event's value:
    ``{"event": "write", "value": lambda v: v in ("ff", "00")}``.
    """
    for key, want in pattern.items():
        if key not in event:
            return False
        if callable(want):
            if not want(event[key]):
                return False
        elif event[key] != want:
            return False
    return True


def _as_predicate(pred: Pred) -> Callable[[dict], bool]:
    if isinstance(pred, dict):
        return lambda event: matches(event, pred)
    return pred


class World(WorldProcess):
    """A running vworld process and the events it has printed, with
    waits that fail the test (with the recent events and vworld's stderr)."""

    def __init__(self, args: list[str], workdir: Path, ready_timeout: float = READY_TIMEOUT):
        super().__init__(args, lifetime=WORLD_LIFETIME, capture_stderr=True)
        self.workdir = workdir
        self.ready: dict = {}
        try:
            self.ready = self.wait_event({"event": "ready"}, timeout=ready_timeout)
        except AssertionError:
            self.stop()
            raise

    # -- queries ------------------------------------------------------------------------
    @property
    def devices(self) -> list[dict]:
        return self.ready.get("devices", [])

    def device(self, name: str) -> dict:
        for info in self.devices:
            if info["name"] == name:
                return info
        raise KeyError(name)

    def transport(self, i: int = 0) -> str:
        """attled transport spec for host i: tcp:H:P, unix:/path or serial:/path."""
        return self.ready["attled"][i]

    def bumble_transport(self, i: int = 0) -> str:
        """Bumble (host side) transport spec for host i."""
        spec = self.transport(i)
        return "tcp-client:" + spec[len("tcp:"):] if spec.startswith("tcp:") else spec

    def mark(self) -> int:
        """Index of the next event; pass as ``since=`` to wait only for newer events."""
        with self._cond:
            return len(self.events)

    def find(self, pred: Pred, since: int = 0) -> list[dict]:
        """All events so far (from index ``since``) that match ``pred``."""
        test = _as_predicate(pred)
        with self._cond:
            return [e for e in self.events[since:] if test(e)]

    def _failure(self, what: str, timeout: float) -> AssertionError:
        why = "vworld exited" if self.exited else f"timeout after {timeout} s"
        return AssertionError(f"{what} ({why}).\nLast events:\n{self.format_events(-20)}"
                              f"\nvworld stderr (tail):\n{self.stderr[-3000:]}")

    def wait_event(self, pred: Pred, timeout: float = 10.0, since: int = 0) -> dict:
        """Return the first event from index ``since`` matching ``pred``.

        Waits up to ``timeout`` seconds; raises AssertionError on timeout or if
        vworld exits first.
        """
        event = self.wait(_as_predicate(pred), timeout, since)
        if event is None:
            raise self._failure(f"no event matching {pred!r}", timeout)
        return event

    def wait_events(self, pred: Pred, count: int, timeout: float = 10.0, since: int = 0) -> list[dict]:
        """Wait until ``count`` events (from index ``since``) match ``pred``; return them all."""
        test = _as_predicate(pred)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events[since:] if test(e)]
                remaining = deadline - time.monotonic()
                if len(found) >= count or remaining <= 0 or self.exited:
                    break
                self._cond.wait(remaining)
        if len(found) >= count:
            return found
        raise self._failure(f"only {len(found)} of {count} events matching {pred!r}", timeout)

    def hosts_gone(self, since: int, count: int = 1, timeout: float = 10.0) -> None:
        """On Root Canal: wait until ``count`` host clients that came since
        ``since`` have left, so the next run's controller gets the public address
        they freed (Root Canal hands a freed address to its next client; a run
        started before the last one's socket is seen closed gets a new one).
        Bumble's host controllers keep their address: nothing to wait for."""
        if self.ready.get("controller") == "rootcanal":
            self.wait_events({"event": "host_disconnected"}, count, timeout=timeout, since=since)

    def format_events(self, start: int = 0) -> str:
        with self._cond:
            chosen = self.events[start:]
        return "\n".join(json.dumps(e) for e in chosen)


def _host_spec(kind: str, index: int, workdir: Path) -> str:
    if ":" in kind:
        return kind  # a full vworld --host spec, used as given
    if kind == "tcp":
        return "tcp-server:127.0.0.1:0"  # vworld picks a free port and reports it
    if kind == "unix":
        return f"unix-server:{workdir / f'h{index}.sock'}"
    if kind == "pty":
        return f"pty:{workdir / f'h{index}-pty'}"
    raise ValueError(f"host kind must be tcp, unix or pty, not {kind!r}")


CONTROLLERS = ("bumble", "rootcanal")


def pytest_configure(config):
    config.addinivalue_line("markers", "controllers: run the test on Bumble's and on Root Canal's controllers")


def pytest_generate_tests(metafunc):
    if metafunc.definition.get_closest_marker("controllers") is not None:
        metafunc.parametrize("controller", CONTROLLERS)


def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.controllers(rootcanal_cases=[ID, ...])``: of a parametrized
    test, only the cases whose id contains one of the IDs run on Root Canal
    too (each Root Canal HCI command costs ~45 ms; the rest stay on Bumble)."""
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker("controllers")
        callspec = getattr(item, "callspec", None)
        cases = mark.kwargs.get("rootcanal_cases") if mark is not None else None
        if cases and callspec is not None and callspec.params.get("controller") == "rootcanal" \
                and not any(case in callspec.id for case in cases):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def controller() -> str:
    """Whose controllers this test's worlds use: "bumble" unless the test is
    marked ``controllers`` (then each of CONTROLLERS in turn)."""
    return "bumble"


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Remember each phase's report on the item so fixtures can see failures.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def world(request, controller):
    """Factory: ``world(devices=[...], hosts=["tcp"], legacy=False, extra_args=[])``.

    devices:    vworld --device specs, "NAME:PROFILE[:key=value,...]".
    hosts:      one entry per host controller: "tcp", "unix" or "pty" (free
                port / temporary path chosen here), or a full vworld --host spec.
    legacy:     host controllers send legacy advertising reports.
    extra_args: more vworld arguments (e.g. ["--spec-controller"]).
    controller: whose controllers; default the ``controller`` fixture's (see
                the module docstring). "bumble" with --peripheral-transport
                attaches devices to another world's controller.
    Returns a started ``World``; all worlds are stopped at teardown, and their
    stderr and events are printed if the test failed.
    """
    worlds: list[World] = []
    default_controller = controller
    # Short directory: AF_UNIX paths are limited to 108 bytes.
    workdir = Path(tempfile.mkdtemp(prefix="vw-", dir="/tmp"))

    def start(
        devices: Iterable[str] = (),
        hosts: Iterable[str] = ("tcp",),
        legacy: bool = False,
        extra_args: Iterable[str] = (),
        ready_timeout: float = READY_TIMEOUT,
        controller: str | None = None,
    ) -> World:
        sub = workdir / f"w{len(worlds)}"
        sub.mkdir()
        args: list[str] = []
        controller = controller or default_controller
        if controller != "bumble":
            args += ["--controller", controller]
        for i, kind in enumerate(hosts):
            args += ["--host", _host_spec(kind, i, sub)]
        for spec in devices:
            args += ["--device", spec]
        if legacy:
            args.append("--legacy-reports")
        args += list(extra_args)
        w = World(args, sub, ready_timeout if controller == "bumble" else max(ready_timeout, 30.0))
        worlds.append(w)
        return w

    yield start

    failed = any(
        getattr(request.node, f"rep_{when}", None) is not None
        and getattr(request.node, f"rep_{when}").failed
        for when in ("setup", "call")
    )
    for w in worlds:
        code = w.stop()
        if failed:
            print(f"\n--- vworld {' '.join(w.args)} (exit {code})")
            print("--- events:\n" + w.format_events())
            print("--- stderr:\n" + w.stderr)
    shutil.rmtree(workdir, ignore_errors=True)


def _run(cmd: list[str], timeout: float, env: dict | None) -> subprocess.CompletedProcess:
    full_env = None if env is None else {**os.environ, **env}
    try:
        return subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            cwd=str(REPO_ROOT),
        )
    except subprocess.TimeoutExpired as error:
        out = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        err = error.stderr.decode() if isinstance(error.stderr, bytes) else (error.stderr or "")
        pytest.fail(f"{cmd[0]} timed out after {timeout} s (killed)\nstdout:\n{out}\nstderr:\n{err}")


def run_attled(args: list[str], timeout: float = 20, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the attled binary with ``args``; hard timeout (fails the test if hit).

    Returns CompletedProcess with text stdout and stderr.  ``env`` entries are
    added to the inherited environment.
    """
    if not ATTLED.exists():
        pytest.fail(f"attled binary not found at {ATTLED}: build it (swift build) or set ATTLED_BIN")
    env = dict(env or {})
    if "XDG_CACHE_HOME" not in env:
        # Each run starts cold unless a test passes its own cache directory
        # (attled's GATT/address cache would otherwise leak between tests).
        env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="attled-cache-", dir="/tmp")
    if "XDG_STATE_HOME" not in env:
        # Bonds likewise: a test pairs only when it means to.
        env["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="attled-state-", dir="/tmp")
    return _run([str(ATTLED), *map(str, args)], timeout, env)


def own_address(stderr: str) -> str:
    """The own address attled's controller line names (needs ``--trace`` or progress output)."""
    import re
    m = re.search(r"own address ([0-9A-F:]{17}) \(", stderr)
    assert m, "no controller line with the own address in:\n" + stderr
    return m.group(1)


def run_bumble_central(args: list[str], timeout: float = 20, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the reference central (attledtools.drivers.bumble_central) like run_attled."""
    return _run(module_command(BUMBLE_CENTRAL, *map(str, args)), timeout, env)


@pytest.fixture(name="run_attled")
def _run_attled_fixture():
    """The ``run_attled`` function, as a fixture."""
    return run_attled


@pytest.fixture(name="run_bumble_central")
def _run_bumble_central_fixture():
    """The ``run_bumble_central`` function, as a fixture."""
    return run_bumble_central


class Running(AttledProcess):
    """attled (ATTLED_BIN) in the background, with a GATT/address cache and a
    bond directory of its own, as run_attled gives (attledtools.drivers.attledproc)."""

    def __init__(self, args: list[str], home=None):
        super().__init__(ATTLED, args, home=home)
