"""attled gateway against mosquitto with TLS (a test CA) and password authentication.

A test CA and a server certificate for 127.0.0.1 / localhost are made with the
openssl CLI, a second, unrelated CA too; mosquitto gets a TLS listener with
``allow_anonymous false`` and a ``password_file`` made by ``mosquitto_passwd``.
The test's own paho client connects with TLS and the password to watch and to
publish commands (the helpers of test_gateway.py, over TLS).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from attledtools.drivers.mqttbroker import Broker, Watcher
from test_gateway import DISCOVERY, GATEWAY_AVAILABILITY, PREFIX, GatewayProcess, node

OPENSSL = shutil.which("openssl")
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd")
USER = "attled-gw"
PASSWORD = "s3cret-Pa55-9f1c7e"  # distinctive, so a leak is found by a plain search

# Installed by `make test-deps` (mosquitto, openssl): missing means failing, not skipping.
assert OPENSSL and MOSQUITTO_PASSWD, "openssl and mosquitto_passwd are needed: make test-deps installs them"


def openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run([OPENSSL, *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"openssl {' '.join(args)}:\n{r.stdout}{r.stderr}"


def make_ca(d: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=attled test {name}",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=d)


class TLSBroker(Broker):
    """mosquitto with one TLS listener on 127.0.0.1:port, passwords required."""

    def __init__(self, d: Path):
        self.dir = d
        make_ca(d, "ca")
        make_ca(d, "other-ca")
        (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                                      "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=d)
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "server.pem", "-days", "2", "-extfile", "server.ext", cwd=d)
        pw = d / "passwd"
        pw.touch()
        r = subprocess.run([MOSQUITTO_PASSWD, "-b", str(pw), USER, PASSWORD], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r.stdout + r.stderr
        # mosquitto started as root reads the files as its own user.
        d.chmod(0o755)
        for f in d.iterdir():
            f.chmod(0o644)
        super().__init__(d, anonymous=False,
                         extra=f"cafile {d / 'ca.pem'}\ncertfile {d / 'server.pem'}\nkeyfile {d / 'server.key'}\n"
                               f"password_file {pw}\n")
        self.start()


@pytest.fixture(scope="module")
def broker():
    d = Path(tempfile.mkdtemp(prefix="gwtls-", dir="/tmp"))
    b = TLSBroker(d)
    yield b
    b.stop()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def gw_factory(broker):
    made: list[GatewayProcess] = []
    d = Path(tempfile.mkdtemp(prefix="gwtls-pw-", dir="/tmp"))

    def start(transport: str, password: str = PASSWORD, ca: str = "ca.pem") -> GatewayProcess:
        pw = d / f"pw{len(made)}"
        pw.write_text(password + "\n")
        pw.chmod(0o600)
        g = GatewayProcess(transport, broker.port, ["--mqtt-tls-ca", str(broker.dir / ca), "--mqtt-user", USER,
                                                   "--mqtt-password-file", str(pw)])
        made.append(g)
        return g

    yield start
    for g in made:
        g.kill()
    shutil.rmtree(d, ignore_errors=True)


def attempts(g: GatewayProcess, seconds: float) -> int:
    """Connection attempts the gateway makes in ``seconds`` (each failure schedules one retry)."""
    start = g.mark()
    time.sleep(seconds)  # counting the gateway's retries over a fixed window is the point
    return g.count("MQTT: reconnecting in", since=start)


def test_tls_and_password_connect_discover_and_command(broker, gw_factory, world):
    w = world(devices=["Lamp1:pycom:init=1,2,3"])
    mq = Watcher(broker.port, broker.dir / "ca.pem", (USER, PASSWORD))
    try:
        g = gw_factory(w.transport())
        g.wait_line("MQTT: connected to 127.0.0.1", timeout=10)
        n = node(w, "Lamp1")
        mq.wait_text(GATEWAY_AVAILABILITY, "online", timeout=10)
        cfg = mq.wait(f"{DISCOVERY}/light/attled_{n}/light/config", timeout=15)
        assert cfg.retain and cfg.json()["command_topic"] == f"{PREFIX}/{n}/set"
        mq.wait_text(f"{PREFIX}/{n}/availability", "online", timeout=15)
        ev, m = w.mark(), mq.mark()
        mq.publish(f"{PREFIX}/{n}/set", '{"state":"ON","brightness":255,"color":{"r":12,"g":34,"b":56}}')
        w.wait_event({"event": "state", "device": "Lamp1", "rgb": [12, 34, 56]}, since=ev)
        st = mq.wait(f"{PREFIX}/{n}/state", lambda x: x.json()["color"] == {"r": 12, "g": 34, "b": 56}, since=m)
        assert st.retain
        # (d) The password is in neither the command line nor the log.
        cmdline = Path(f"/proc/{g.p.pid}/cmdline").read_bytes().decode("utf-8", "replace")
        assert PASSWORD not in cmdline, cmdline
        assert "--mqtt-password-file" in cmdline
        code = g.stop(signal.SIGTERM)
        assert code == 0, g.stderr
        assert PASSWORD not in g.stderr
        assert USER in broker.log.read_text()  # the broker saw the user log in
    finally:
        mq.close()


def test_wrong_password_is_logged_and_retried_with_backoff(broker, gw_factory, world):
    w = world(hosts=["tcp"])
    g = gw_factory(w.transport(), password="not-" + PASSWORD)
    line = g.wait_line("refused the connection", timeout=10)
    assert "CONNACK" in line, line
    n = attempts(g, 3.0)
    # 500 ms doubling (with jitter): a handful in 3 s, not a spin.
    assert 1 <= n <= 6, f"{n} attempts in 3 s:\n{g.stderr}"
    assert g.p.poll() is None, "the gateway exited"
    assert g.count("MQTT: connected to") == 0
    assert PASSWORD not in g.stderr
    assert g.stop(signal.SIGINT) == 0
    print(f"wrong password: {n} attempts in 3 s\n{g.stderr}")


def test_unknown_ca_is_a_tls_failure_retried_with_backoff(broker, gw_factory, world):
    w = world(hosts=["tcp"])
    g = gw_factory(w.transport(), ca="other-ca.pem")
    line = g.wait_line(lambda l: "MQTT:" in l and ("TLS" in l or "certificate" in l), timeout=10)
    assert "reconnecting in" not in line, line
    n = attempts(g, 3.0)
    assert 1 <= n <= 6, f"{n} attempts in 3 s:\n{g.stderr}"
    assert g.p.poll() is None, "the gateway exited"
    assert g.count("MQTT: connected to") == 0
    assert g.stop(signal.SIGINT) == 0
    print(f"unknown CA: {n} attempts in 3 s\n{g.stderr}")
