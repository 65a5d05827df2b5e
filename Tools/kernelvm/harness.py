#!/usr/bin/env python3
"""Host side of the kernel test: boots the guest and judges the test list.

run.sh builds the pieces (kernel, initramfs, static attled) and then runs
this with the venv's Python (it needs Bumble, through vworld, and the package
attledtools, installed there by make venv).

On the host:
  * vworld (air): four Bumble host controllers on one virtual link, served
    as H4: hci.sock is the guest's controller (the guest's hci_vhci is
    bridged to it over virtio-serial), periph.sock carries the LED
    peripheral, and two TCP ports are for `attled serve` on the host (the
    board the guest's kernel connects to as the central, serve_host.py):
    one controller with a public address, one without.
  * vworld (peripheral): the current LED peripheral (a --device spec),
    attached to periph.sock with --peripheral-transport; the guest asks for
    another one with "profile SPEC", and it is replaced.
  * qemu: the guest (Debian's kernel, busybox initramfs; qemu-system-x86_64,
    or with --arch arm64 qemu-system-aarch64 -M virt under TCG), two virtserialports
    (attled.hci, attled.ctl), console to console.log, and a user-mode (slirp)
    NIC: the guest reaches the host's loopback at 10.0.2.2, where the
    gateway test's broker listens.
  * mosquitto (attledtools.drivers.mqttbroker), started when the guest asks ("mqtt"),
    with a paho client watching every message: the broker of `attled
    gateway` in the guest, and the judge of what the gateway published.
  * the ctl port: the guest's requests (see init.sh); the host answers
    "expect" from the peripherals' events and "mqtt_expect" from the
    broker's messages, which the guest cannot see.

Every process is bounded in time; a guest that hangs is killed and the run
fails with its console log. The last line is "N passed, N failed".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from attledtools import module_command  # installed in the venv (make venv)
from serve_host import ServeHost  # this directory: sys.path[0]

ROOT = Path(__file__).resolve().parents[2]
VWORLD = "attledtools.drivers.vworld"
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"kernelvm: {msg}", flush=True)


def elapsed() -> float:
    return time.monotonic() - T0


# -----------------------------------------------------------------------------
# Events from the vworld processes
# -----------------------------------------------------------------------------
class Events:
    """Every vworld event, in arrival order, with the world it came from."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []
        self.cond = threading.Condition()

    def add(self, source: str, event: dict[str, Any]) -> None:
        with self.cond:
            self.items.append((source, event))
            self.cond.notify_all()

    def mark(self) -> int:
        with self.cond:
            return len(self.items)

    @staticmethod
    def matches(event: dict[str, Any], pattern: dict[str, Any]) -> bool:
        return all(k in event and event[k] == v for k, v in pattern.items())

    def find(self, pattern: dict[str, Any], since: int) -> list[dict[str, Any]]:
        with self.cond:
            return [e for _, e in self.items[since:] if self.matches(e, pattern)]

    def wait(self, pattern: dict[str, Any], since: int, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for _, e in self.items[since:]:
                    if self.matches(e, pattern):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.2))

    def summary(self, since: int, limit: int = 12) -> str:
        with self.cond:
            evs = [e for _, e in self.items[since:] if e.get("event") not in ("advertising",)]
        names = [e.get("event", "?") for e in evs]
        text = ", ".join(names[-limit:])
        return f"{len(evs)} event(s) since the test began: {text}" if evs else "no events since the test began"


class World:
    """One vworld process; its JSON event lines go to Events."""

    def __init__(self, name: str, args: list[str], events: Events | None, workdir: Path, lifetime: float):
        self.name = name
        self.events = events
        self.ready: dict[str, Any] | None = None
        self.ready_cond = threading.Condition()
        self.lines: list[str] = []
        self.stderr_path = workdir / f"{name}.stderr"
        self.events_path = workdir / f"{name}.events"
        cmd = module_command(VWORLD, *args, "--exit-on-stdin-eof", "--lifetime", str(int(lifetime)))
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.stderr_path, "wb"), text=True, cwd=ROOT)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.events_path, "w") as out:
            for line in self.proc.stdout:
                out.write(line)
                out.flush()
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("event") == "ready":
                    with self.ready_cond:
                        self.ready = ev
                        self.ready_cond.notify_all()
                if self.events is not None:
                    self.events.add(self.name, ev)
        with self.ready_cond:
            self.ready_cond.notify_all()

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.ready_cond:
            while self.ready is None:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    err = self.stderr_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"vworld {self.name} not ready (exit {self.proc.poll()}): {err}")
                self.ready_cond.wait(min(left, 0.2))
            return self.ready

    def stop(self, timeout: float = 5.0) -> int | None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(2)
        if self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        self.reader.join(2)
        return self.proc.returncode


# -----------------------------------------------------------------------------
# --trace comparison with a run over TCP on the host
# -----------------------------------------------------------------------------
def trace_packets(trace: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    for line in trace.splitlines():
        if line.startswith(("< ", "> ")):
            blocks.append([line])
        elif blocks and line.startswith("      "):
            blocks[-1].append(line)
    return blocks


def normalise_trace(trace: str) -> list[str]:
    """The packet sequence without what legitimately differs between runs:
    timestamps and numbering, the generated random address, advertising
    reports (their count depends on timing) and Number Of Completed Packets
    (before or after the ATT response)."""
    m = re.search(r"own address ([0-9A-F:]{17})", trace)
    own = m.group(1) if m else None
    out = []
    for b in trace_packets(trace):
        text = "\n".join(b)
        if "Advertising Report" in text or "Number of Completed Packets" in text:
            continue
        text = re.sub(r"  #\d+ \d+\.\d+$", "", text, flags=re.M)
        if own:
            text = text.replace(own, "<own>")
        text = re.sub(r"(Address: )[0-9A-F:]{17}( \(static\))", r"\1<own>\2", text)
        out.append(text)
    return out


def reference_trace(attled: Path, device: str, args: list[str], workdir: Path) -> tuple[int, str]:
    """attled ARGS over TCP against a fresh world with DEVICE, on the host."""
    w = World("tcpref", ["--host", "tcp-server:127.0.0.1:0", "--spec-controller", "--device", device], None, workdir, 60)
    try:
        ready = w.wait_ready(20)
        # Its own cache and bond directories: the host's /var/cache/attled and
        # /var/lib/attled are never touched.
        env = {**os.environ, "XDG_CACHE_HOME": str(workdir / "cache"), "XDG_STATE_HOME": str(workdir / "state")}
        # The guest's attled has met hci0 before and remembers its description
        # (no Read Local Supported Commands, LE features and states): a first
        # run here teaches this state directory the reference controller's, so
        # both traces come from a controller attled already knows.
        subprocess.run([str(attled), "-i", ready["attled"][0], "scan", "--timeout", "0.2"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30, env=env)
        p = subprocess.run([str(attled), "-i", ready["attled"][0], *args], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30, env=env)
        return p.returncode, p.stderr
    finally:
        w.stop()


def compare_traces(guest: str, ref: str) -> str | None:
    a, b = normalise_trace(guest), normalise_trace(ref)
    if not a:
        return "no packets in the guest's trace"
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return (f"packet {i + 1} differs: hci0 has {x.splitlines()[0].strip()!r}, "
                    f"TCP has {y.splitlines()[0].strip()!r}")
    return f"hci0 trace has {len(a)} packets, TCP has {len(b)}"


# -----------------------------------------------------------------------------
# The run
# -----------------------------------------------------------------------------
class Run:
    def __init__(self, args) -> None:
        self.args = args
        self.workdir = Path(args.workdir)
        self.events = Events()
        self.air: World | None = None
        self.periph: World | None = None
        self.periph_count = 0
        self.plan: list[str] = []
        self.results: dict[str, tuple[str, str, str]] = {}  # name -> (pass|fail, secs, reason)
        self.order: list[str] = []
        self.mark = 0
        self.air_lost = False
        self.current = ""
        self.hello = False
        self.done = False
        self.data: list[str] = []
        self.lifetime = args.timeout + 60
        self.periph_address = ""
        self.broker = None  # mqttbroker.Broker, once the guest asked for one
        self.mq = None      # mqttbroker.Watcher on it
        self.mq_mark = 0
        self.t_boot = 0.0   # when qemu was started
        # attled serve on the air's third controller, when the guest asks; its own
        # cache and state directories (the host's are never touched).
        env = {**os.environ, "XDG_CACHE_HOME": str(self.workdir / "cache"), "XDG_STATE_HOME": str(self.workdir / "state")}
        self.serve = ServeHost(args.host_attled or args.attled, self.workdir, self.events, env)

    # --- worlds --------------------------------------------------------------
    def start_air(self) -> None:
        self.air = World("air", ["--host", f"unix-server:{self.workdir}/hci.sock",
                                 "--host", f"unix-server:{self.workdir}/periph.sock",
                                 # attled serve's (serve_host.py): public F0:..:03; no public address,
                                 # so serve advertises with a static random one.
                                 "--host", "tcp-server:127.0.0.1:0", "--host", "tcp-server:127.0.0.1:0",
                                 "--zero-address-host", "3",
                                 # A real controller's HCI_Reset clears scanning; Bumble's stock one does
                                 # not, and the kernel's HCIDEVUP after a SIGKILLed attled relies on it.
                                 "--reset-on-host-close", "--spec-controller"], self.events, self.workdir, self.lifetime)
        ready = self.air.wait_ready(30)
        self.serve.transports = {"public": ready["attled"][2], "random": ready["attled"][3]}
        log(f"virtual air ready: guest controller {ready['host_addresses'][0]} on hci.sock, "
            f"attled serve's {ready['host_addresses'][2]} and {ready['host_addresses'][3]} on "
            f"{ready['attled'][2]} and {ready['attled'][3]}")

    def set_peripheral(self, spec: str) -> str:
        if self.periph is not None:
            self.periph.stop()
            self.periph = None
        self.periph_count += 1
        self.periph = World(f"periph{self.periph_count}",
                            ["--device", spec, "--peripheral-transport", f"unix:{self.workdir}/periph.sock"],
                            self.events, self.workdir, self.lifetime)
        try:
            ready = self.periph.wait_ready(20)
        except RuntimeError as e:
            return f"err {e}".replace("\n", " ")[:400]
        d = ready["devices"][0]
        self.periph_address = str(d.get("address", ""))
        log(f"peripheral {spec}: {d.get('address')} advertising")
        return "ok"

    def stop_worlds(self) -> None:
        self.serve.stop(5)
        for w in (self.periph, self.air):
            if w is not None:
                w.stop()
        if self.mq is not None:
            self.mq.close()
        if self.broker is not None:
            self.broker.stop()

    # --- MQTT ----------------------------------------------------------------
    def subst(self, text: str) -> str:
        """{node} is the gateway's id of the current peripheral: its address, lower case, no colons."""
        return text.replace("{node}", self.periph_address.replace(":", "").lower())

    def mqtt(self, cmd: str, rest: str) -> str:
        from attledtools.drivers.mqttbroker import Broker, Watcher  # paho: only when the guest asks
        if cmd == "mqtt":
            # Starts the broker (again, on the same port, after mqtt_kill) and the watcher.
            if self.broker is None:
                self.broker = Broker(self.workdir)
            if self.broker.p is None or self.broker.p.poll() is not None:
                self.broker.start()
            if self.mq is None:
                self.mq = Watcher(self.broker.port)
            log(f"mosquitto on 127.0.0.1:{self.broker.port} (10.0.2.2 in the guest)")
            return f"ok {self.broker.port}"
        if self.broker is None or self.mq is None:
            return "fail no broker: the guest must ask for one with 'mqtt' first"
        if cmd == "mqtt_kill":
            self.broker.kill()
            return "ok"
        if cmd == "mqtt_mark":
            self.mq_mark = self.mq.mark()
            return "ok"
        if cmd == "mqtt_publish":
            topic, _, payload = rest.partition(" ")
            self.mq.publish(self.subst(topic), self.subst(payload))
            return "ok"
        if cmd == "mqtt_expect":
            # SECS TOPIC TEXT|JSON: the first message on TOPIC since the mark whose payload is
            # TEXT, or whose JSON holds every key of JSON (nested objects likewise).
            parts = rest.split(" ", 2)
            if len(parts) < 3:
                return "fail mqtt_expect needs SECS TOPIC PATTERN"
            secs, topic, want = float(parts[0]), self.subst(parts[1]), self.subst(parts[2])
            pattern = json.loads(want) if want.startswith("{") else None

            def holds(doc: Any, pat: Any) -> bool:
                if isinstance(pat, dict):
                    return isinstance(doc, dict) and all(k in doc and holds(doc[k], v) for k, v in pat.items())
                return doc == pat

            def ok(m) -> bool:
                if pattern is None:
                    return m.text == want
                try:
                    return holds(m.json(), pattern)
                except ValueError:
                    return False
            try:
                m = self.mq.wait(topic, ok, self.mq_mark, secs)
            except AssertionError as e:
                return "fail " + str(e).replace("\n", " | ")[:600]
            return f"pass {m.topic} {m.text[:200]}"
        return f"fail unknown request {cmd}"

    # --- ctl -----------------------------------------------------------------
    def handle(self, line: str) -> str | None:
        cmd, _, rest = line.partition(" ")
        if cmd == "data":
            self.data.append(rest)
            return None
        if cmd == "hello":
            self.hello = True
            boot = f"{time.monotonic() - self.t_boot:.1f} s after qemu started, " if self.t_boot else ""
            log(f"guest is up ({boot}{elapsed():.1f} s into the run)")
            return "ok"
        if cmd == "plan":
            self.plan = rest.split()
            return "ok"
        if cmd == "profile":
            return self.set_peripheral(rest.strip())
        if cmd == "begin":
            self.current = rest.strip()
            self.mark = self.events.mark()
            self.mq_mark = self.mq.mark() if self.mq is not None else 0
            self.data = []
            return "ok"
        if cmd.startswith("mqtt"):
            return self.mqtt(cmd, rest)
        if cmd.startswith("serve"):
            return self.serve.handle(cmd, rest)
        if cmd in ("expect", "expect_none"):
            secs, _, js = rest.partition(" ")
            try:
                pattern = json.loads(js)
                secs_f = float(secs)
            except ValueError as e:
                return f"fail bad request: {e}"
            if cmd == "expect":
                ev = self.events.wait(pattern, self.mark, secs_f)
                if ev is None:
                    return f"fail no event {js} within {secs} s; {self.events.summary(self.mark)}"
                return "pass " + json.dumps(ev, separators=(",", ":"))
            time.sleep(secs_f)
            found = self.events.find(pattern, self.mark)
            if found:
                return "fail unexpected event " + json.dumps(found[0], separators=(",", ":"))
            return f"pass no event {js}"
        if cmd == "compare_trace":
            words = rest.split()
            if not words:
                return "fail compare_trace needs DEVICE ARGS"
            try:
                code, ref = reference_trace(Path(self.args.attled), words[0], words[1:], self.workdir)
            except Exception as e:  # noqa: BLE001
                return f"fail reference run over TCP: {e}".replace("\n", " ")[:400]
            (self.workdir / "trace-tcp.txt").write_text(ref)
            (self.workdir / "trace-hci0.txt").write_text("\n".join(self.data) + "\n")
            if code != 0:
                return f"fail the reference run over TCP exited {code}"
            diff = compare_traces("\n".join(self.data), ref)
            n = len(normalise_trace(ref))
            return f"pass {n} packets identical to the TCP run" if diff is None else f"fail {diff}"
        if cmd == "result":
            parts = rest.split(" ", 3)
            name = parts[0]
            res = parts[1] if len(parts) > 1 else "fail"
            secs = parts[2] if len(parts) > 2 else "?"
            reason = parts[3] if len(parts) > 3 else ""
            self.results[name] = (res, secs, reason)
            self.order.append(name)
            mark = "ok  " if res == "pass" else "FAIL"
            log(f"{mark} {name} ({secs} s){': ' + reason if reason else ''}")
            return "ok"
        if cmd == "done":
            self.done = True
            return "ok"
        return f"fail unknown request {cmd}"

    def ctl_loop(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    raw, buf = buf.split(b"\n", 1)
                    line = raw.decode("utf-8", "replace").rstrip("\r")
                    try:
                        reply = self.handle(line)
                    except Exception as e:  # noqa: BLE001
                        reply = f"fail host error: {e}".replace("\n", " ")
                    if reply is not None:
                        try:
                            conn.sendall((reply + "\n").encode())
                        except OSError:
                            return

    # --- qemu ----------------------------------------------------------------
    def qemu_cmd(self, accel: str, cmdline_extra: str = "") -> list[str]:
        a = self.args
        console = "ttyAMA0" if a.arch == "arm64" else "ttyS0"
        # attled.list=NAME: the guest runs tests.sh's TEST_LIST_NAME (init.sh).
        lst = f"attled.list={a.list}" if a.list and a.list != "full" else ""
        cmdline = f"console={console} loglevel=4 panic=-1 mitigations=off {lst} {cmdline_extra}".strip()
        cmd = [a.qemu, "-accel", accel]
        if a.arch == "arm64":
            # The virt board (PL011 console, PCIe for the virtio devices); -cpu max
            # has FEAT_RNG (the guest's entropy at once), and pauth-impdef makes
            # pointer authentication cheap to emulate under TCG.
            cmd += ["-M", "virt", "-cpu", "max,pauth-impdef=on"]
        cmd += ["-m", "512", "-smp", "1", "-nodefaults", "-no-user-config",
                "-display", "none", "-no-reboot",
                "-kernel", a.kernel, "-initrd", a.initrd, "-append", cmdline,
                "-serial", f"file:{self.workdir}/console.log"]
        if accel == "kvm":
            cmd += ["-cpu", "host"]
        if cmdline_extra:
            cmd += ["-nic", "none"]
        else:
            # User-mode networking: the guest's 10.0.2.2 is the host's loopback.
            cmd += ["-nic", "user,model=virtio-net-pci"]
            cmd += ["-device", "virtio-serial-pci",
                    "-chardev", f"socket,id=hci,path={self.workdir}/hci.sock",
                    "-device", "virtserialport,chardev=hci,name=attled.hci",
                    "-chardev", f"socket,id=ctl,path={self.workdir}/ctl.sock",
                    "-device", "virtserialport,chardev=ctl,name=attled.ctl"]
        return cmd

    def boot(self, accel: str) -> tuple[bool, str]:
        """Boots the guest and serves its ctl port. Returns (finished, console)."""
        ctl_path = self.workdir / "ctl.sock"
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(str(ctl_path))
        srv.listen(1)
        srv.settimeout(1.0)
        cmd = self.qemu_cmd(accel)
        (self.workdir / "qemu.cmd").write_text(" ".join(cmd) + "\n")
        qlog = open(self.workdir / "qemu.log", "wb")
        t_boot = self.t_boot = time.monotonic()
        q = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT)
        log(f"booting the guest ({accel}, timeout {self.args.timeout:.0f} s)")
        deadline = t_boot + self.args.timeout
        conn_thread = None
        try:
            while conn_thread is None and q.poll() is None and time.monotonic() < deadline:
                try:
                    conn, _ = srv.accept()
                except socket.timeout:
                    continue
                conn_thread = threading.Thread(target=self.ctl_loop, args=(conn,), daemon=True)
                conn_thread.start()
            while q.poll() is None and time.monotonic() < deadline:
                if self.air is not None and self.air.proc.poll() is not None:
                    # The guest's controller is gone: nothing after this can pass.
                    log(f"the virtual air (vworld, pid {self.air.proc.pid}) exited during the run "
                        f"(exit {self.air.proc.returncode}; was it killed from outside?): stopping the guest")
                    self.air_lost = True
                    break
                time.sleep(0.1)
            timed_out = q.poll() is None
            if timed_out:
                if not self.air_lost:
                    log(f"the guest did not finish within {self.args.timeout:.0f} s: killed")
                q.kill()
            q.wait(10)
        finally:
            if q.poll() is None:
                q.kill()
                q.wait(5)
            srv.close()
            qlog.close()
        if conn_thread is not None:
            conn_thread.join(5)
        log(f"guest exited ({time.monotonic() - t_boot:.1f} s, qemu exit {q.returncode})")
        console = (self.workdir / "console.log").read_text(errors="replace") if (self.workdir / "console.log").exists() else ""
        return (not timed_out and self.done), console

    # --- report --------------------------------------------------------------
    def console_section(self, console: str, name: str) -> str:
        m = re.search(rf"^=== BEGIN {re.escape(name)}\r?$(.*?)^=== END {re.escape(name)} ", console, re.S | re.M)
        return m.group(1).strip("\r\n") if m else ""


def probe_kvm(args, workdir: Path) -> bool:
    """Boots with -accel kvm and a probe-only /init; True if it reaches userspace quickly."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    d = Path(tempfile.mkdtemp(prefix="probe-", dir=workdir))
    r = Run(argparse.Namespace(**{**vars(args), "workdir": str(d)}))
    cmd = r.qemu_cmd("kvm", "attled.probe=1")
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=args.kvm_probe_timeout)
        ok = p.returncode == 0 and "KVMPROBE OK" in (d / "console.log").read_text(errors="replace")
    except subprocess.TimeoutExpired:
        ok = False
    return ok


def choose_accel(args, workdir: Path) -> str:
    if args.arch == "arm64" and os.uname().machine != "aarch64":
        if args.accel == "kvm":
            raise RuntimeError("KVM cannot run an aarch64 guest on this host: KERNELVM_ACCEL=tcg or auto")
        log("accelerator: tcg (an aarch64 guest on a non-aarch64 host)")
        return "tcg"
    if args.accel in ("tcg", "kvm"):
        return args.accel
    cache = Path(args.cache) / "kvm-probe" if args.cache else None
    key = f"{os.uname().release} {args.kernel_version}"
    if cache and cache.exists():
        saved = cache.read_text().split("\n", 1)
        if len(saved) == 2 and saved[1].strip() == key:
            log(f"accelerator: {saved[0]} (cached KVM probe; KERNELVM_ACCEL=tcg|kvm overrides)")
            return saved[0]
    t = time.monotonic()
    accel = "kvm" if probe_kvm(args, workdir) else "tcg"
    log(f"KVM probe: {'boots' if accel == 'kvm' else 'does not boot (or no /dev/kvm)'} "
        f"({time.monotonic() - t:.1f} s): using {accel}")
    if cache:
        cache.write_text(f"{accel}\n{key}\n")
    return accel


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--kernel-version", default="")
    ap.add_argument("--initrd", required=True)
    ap.add_argument("--attled", required=True, help="the static attled (also runs the TCP reference trace)")
    ap.add_argument("--host-attled", default="", help="the host's attled for attled serve (default: --attled)")
    ap.add_argument("--qemu", default="qemu-system-x86_64")
    ap.add_argument("--arch", default="amd64", choices=["amd64", "arm64"], help="the guest's architecture")
    ap.add_argument("--list", default="full", help="tests.sh's TEST_LIST_NAME to run (full: TEST_LIST)")
    ap.add_argument("--accel", default="auto", choices=["auto", "tcg", "kvm"])
    ap.add_argument("--kvm-probe-timeout", type=float, default=10.0)
    ap.add_argument("--timeout", type=float, default=240.0, help="the guest's whole run (seconds)")
    ap.add_argument("--cache", default="")
    ap.add_argument("--workdir", default="", help="for sockets and logs; removed after a run that passed")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (console log, events)")
    args = ap.parse_args()

    # SIGTERM unwinds like Ctrl-C: the finally blocks kill qemu and the worlds.
    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)

    if not args.workdir:
        args.workdir = tempfile.mkdtemp(prefix="attled-kvm-", dir="/tmp")  # AF_UNIX paths stay short
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    host_checks: list[tuple[str, bool, str]] = []
    run = Run(args)
    finished = False
    console = ""
    try:
        accel = choose_accel(args, workdir)
        run.start_air()
        finished, console = run.boot(accel)
    except KeyboardInterrupt as e:
        host_checks.append(("harness", False, f"interrupted ({e or 'SIGINT'}): qemu and the worlds stopped"))
    except Exception as e:  # noqa: BLE001
        host_checks.append(("harness", False, f"{type(e).__name__}: {e}"))
    finally:
        run.stop_worlds()

    # Tally: every test the guest planned, plus the run itself.
    passed = failed = 0
    failures: list[str] = []
    host_checks.append(("the virtual air stayed up", not run.air_lost, "vworld exited during the run"))
    host_checks.append(("guest booted and reached the test list", run.hello, "no hello from the guest"))
    host_checks.append(("guest ran the whole list and powered off", finished,
                        "the guest did not finish (hang, crash or timeout)"))
    for name, ok, why in host_checks:
        if ok:
            passed += 1
        else:
            failed += 1
            failures.append(name)
            log(f"FAIL {name}: {why}")
    for name in run.plan or run.order:
        res = run.results.get(name)
        if res and res[0] == "pass":
            passed += 1
            continue
        failed += 1
        failures.append(name)
        if res is None:
            why = "begun but never ended (the guest hung or died in it)" if name == run.current else "not run"
            log(f"FAIL {name}: {why}")
    if failed:
        sections = [(n, run.console_section(console, n)) for n in failures]
        shown = False
        for n, text in sections:
            if text:
                print(f"\n--- guest output of {n}:\n{text}", flush=True)
                shown = True
        if not finished or not shown:
            tail = "\n".join(console.splitlines()[-150:])
            print(f"\n--- guest console log (last 150 lines of {workdir}/console.log):\n{tail}", flush=True)
        for w in ("air", *[f"periph{i}" for i in range(1, run.periph_count + 1)], "serve"):
            p = workdir / f"{w}.stderr"
            if p.exists() and p.stat().st_size:
                print(f"\n--- {w} stderr:\n{p.read_text(errors='replace')[-3000:]}", flush=True)
        if run.broker is not None and run.broker.log.exists() and run.broker.log.stat().st_size:
            print(f"\n--- mosquitto log:\n{run.broker.log.read_text(errors='replace')[-3000:]}", flush=True)
        if run.mq is not None:
            recent = "\n".join(f"  {m.topic} {m.text[:160]}" for m in run.mq.messages[-30:])
            print(f"\n--- the last MQTT messages the host saw:\n{recent}", flush=True)
        print(f"\n(work directory kept: {workdir})", flush=True)
    elif args.keep:
        log(f"work directory kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    log(f"total {elapsed():.1f} s")
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
