"""Encrypted links (issue 13): attled pairs, bonds and encrypts against a
Bumble LED peripheral whose LED characteristics need an encrypted link
(attledtools.peers, secure=enc, proven by test_secure_peer.py).

Bumble's own SMP is the judge: it checks attled's confirm values and DHKey
Check (Secure Connections) or Mconfirm (legacy), and on re-encryption its
virtual controller compares the LTK attled sends with the one the peer looks
up, so a wrong key fails (status 0x06, or the link drops with 0x3D).
"""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from conftest import run_attled, own_address

EXIT_SECURITY = 8
NAME = "Lamp"


@pytest.fixture(name="dirs")
def _dirs(tmp_path):
    """Separate cache and bond (state) directories for one test."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    return env


def start(world, profile: str = "pycom", opts: str = ""):
    spec = f"{NAME}:{profile}:secure=enc" + (f",{opts}" if opts else "")
    return world(devices=[spec])


def attled(w, dirs, *args, timeout: float = 20):
    """One run of attled against the world's device; returns when its host
    client is gone (on Root Canal the next run then gets the same public
    address: the identity the device bonded with)."""
    m = w.mark()
    r = run_attled(["-i", w.transport(), "--name", NAME, *args], env=dirs, timeout=timeout)
    w.hosts_gone(m)
    return r


def bond_file(dirs) -> str:
    d = os.path.join(dirs["XDG_STATE_HOME"], "attled")
    names = [n for n in os.listdir(d) if n.startswith("bond-")]
    assert len(names) == 1, names
    return os.path.join(d, names[0])


def stored_ltk(dirs) -> str:
    with open(bond_file(dirs)) as f:
        return next(line.split()[1] for line in f if line.startswith("ltk "))


def leaks(key_hex: str, text: str) -> bool:
    """True when the key's bytes appear in ``text`` in either byte order, as
    hex with or without spaces (how a trace or a hex dump would show them)."""
    b = bytes.fromhex(key_hex)
    flat = re.sub(r"[^0-9a-f]", "", text.lower())
    # Hex dumps wrap lines: compare against the text with separators removed too.
    return any(k.hex() in flat or k.hex(" ") in text.lower() for k in (b, b[::-1]))


@pytest.mark.controllers
def test_first_run_pairs_with_secure_connections_then_bond_encrypts(world, dirs):
    w = start(world)
    r = attled(w, dirs, "--rgb", "10,20,30", "--trace")
    assert r.returncode == 0, r.stderr
    # The colour write was refused (0x0F), attled paired, and wrote again.
    assert "Insufficient Encryption (0x0f)" in r.stderr
    assert "SMP: Pairing Request (0x01)" in r.stderr and "SMP: Pairing DHKey Check (0x0d)" in r.stderr
    assert re.search(r"attled: pair .*LE Secure Connections, Just Works, bonded", r.stderr), r.stderr
    ev = w.wait_event({"event": "pairing", "device": NAME})
    assert ev["result"] == "complete" and ev["sc"] is True and ev["bonded"] is True
    # attled gave its identity (the controller's address, an IRK kept in local-irk).
    assert ev["irk"] is True and ev["identity"] == own_address(r.stderr)
    w.wait_event({"event": "state", "device": NAME, "rgb": [10, 20, 30]})
    # Keys never leak: not in the trace (masked), not on stdout.
    ltk = stored_ltk(dirs)
    assert not leaks(ltk, r.stdout + r.stderr)

    # Second run: LE Enable Encryption with the stored LTK, no pairing at all.
    m = w.mark()
    r = attled(w, dirs, "--rgb", "40,50,60", "--trace")
    assert r.returncode == 0, r.stderr
    assert "encrypt" in r.stderr and "with the stored bond" in r.stderr
    assert "Pairing Request" not in r.stderr and "Insufficient Encryption" not in r.stderr
    ev = w.wait_event({"event": "encryption", "device": NAME}, since=m)
    assert ev["enabled"] is True and ev["during_pairing"] is False
    assert not w.find({"event": "pairing"}, since=m)
    w.wait_event({"event": "state", "device": NAME, "rgb": [40, 50, 60]}, since=m)

    # get over the bonded link.
    r = attled(w, dirs, "get", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rgb"] == [40, 50, 60]
    assert not leaks(ltk, r.stdout + r.stderr)


@pytest.mark.controllers
def test_bond_files_are_private_and_listed_without_keys(world, dirs):
    w = start(world)
    assert attled(w, dirs, "--rgb", "1,1,1", "--pair").returncode == 0
    d = os.path.join(dirs["XDG_STATE_HOME"], "attled")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    path = bond_file(dirs)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [n for n in os.listdir(d) if ".tmp" in n]  # written atomically
    ltk = stored_ltk(dirs)
    listed = run_attled(["bonds"], env=dirs)
    assert listed.returncode == 0 and "C0:11:22:33:44:55" in listed.stdout and "LE Secure Connections" in listed.stdout
    js = run_attled(["bonds", "--json"], env=dirs)
    doc = json.loads(js.stdout)
    assert [b["identity"] for b in doc["bonds"]] == ["C0:11:22:33:44:55"] and doc["bonds"][0]["irk"] is True
    assert not leaks(ltk, listed.stdout + listed.stderr + js.stdout)
    gone = run_attled(["bonds", "--remove", "C0:11:22:33:44:55"], env=dirs)
    assert gone.returncode == 0, gone.stderr
    assert not os.path.exists(path)
    again = run_attled(["bonds", "--remove", "C0:11:22:33:44:55"], env=dirs)
    assert again.returncode == 5 and "no bond" in again.stderr


@pytest.mark.controllers
def test_device_that_forgot_the_bond_is_paired_with_again(world, dirs):
    w = start(world, opts="forget_bonds=1")
    assert attled(w, dirs, "--rgb", "1,2,3").returncode == 0
    w.wait_event({"event": "bonds_forgotten", "device": NAME})
    first = stored_ltk(dirs)
    m = w.mark()
    r = attled(w, dirs, "--rgb", "4,5,6")
    assert r.returncode == 0, r.stderr
    assert "forgotten the bond" in r.stderr and "pairing again" in r.stderr
    ev = w.wait_event({"event": "pairing", "device": NAME}, since=m)
    assert ev["result"] == "complete"
    w.wait_event({"event": "state", "device": NAME, "rgb": [4, 5, 6]}, since=m)
    assert stored_ltk(dirs) != first  # the stale bond was replaced


def test_no_repair_refuses_to_pair_again(world, dirs):
    w = start(world, opts="forget_bonds=1")
    assert attled(w, dirs, "--rgb", "1,2,3").returncode == 0
    w.wait_event({"event": "bonds_forgotten", "device": NAME})
    m = w.mark()
    r = attled(w, dirs, "--rgb", "4,5,6", "--no-repair")
    assert r.returncode == EXIT_SECURITY, r.stderr
    assert "forgotten the bond" in r.stderr and "--no-repair" in r.stderr
    assert not w.find({"event": "pairing"}, since=m)
    assert not w.find({"event": "state", "rgb": [4, 5, 6]}, since=m)


@pytest.mark.controllers
def test_legacy_only_device_pairs_with_legacy_just_works(world, dirs):
    w = start(world, opts="pairing=legacy")
    r = attled(w, dirs, "--rgb", "7,8,9", "--trace")
    assert r.returncode == 0, r.stderr
    assert re.search(r"attled: pair .*LE legacy, Just Works, bonded", r.stderr), r.stderr
    ev = w.wait_event({"event": "pairing", "device": NAME})
    assert ev["result"] == "complete" and ev["sc"] is False
    w.wait_event({"event": "state", "device": NAME, "rgb": [7, 8, 9]})
    # The legacy LTK with the EDIV and Rand the peer distributed re-encrypts.
    m = w.mark()
    r = attled(w, dirs, "--rgb", "9,8,7")
    assert r.returncode == 0, r.stderr
    assert "with the stored bond (LE legacy" in r.stderr
    ev = w.wait_event({"event": "ltk_request", "device": NAME}, since=m)
    assert ev["found"] is True and ev["source"] == "bond"
    w.wait_event({"event": "state", "device": NAME, "rgb": [9, 8, 7]}, since=m)


@pytest.mark.controllers
@pytest.mark.parametrize("mode", ["--trace", "--trace=hex"])
def test_keys_are_masked_in_the_trace_unless_asked(world, dirs, mode):
    """Legacy pairing distributes the LTK over the air (Encryption
    Information) and encrypts with the STK: both would show in a trace."""
    w = start(world, opts="pairing=legacy")
    r = attled(w, dirs, "--rgb", "1,2,3", mode)
    assert r.returncode == 0, r.stderr
    ltk = stored_ltk(dirs)
    assert "SMP: Encryption Information (0x06)" in r.stderr and "LE Enable Encryption (0x2019)" in r.stderr
    assert not leaks(ltk, r.stdout + r.stderr), "the LTK is in the trace"
    assert "<hidden>" in r.stderr or "key hidden" in r.stderr
    # --trace=keys shows them (for debugging one's own devices).
    os.remove(bond_file(dirs))
    w.stop()
    w = start(world, opts="pairing=legacy")
    r = attled(w, dirs, "--rgb", "1,2,3", "--trace=keys")
    assert r.returncode == 0, r.stderr
    assert leaks(stored_ltk(dirs), r.stderr)


@pytest.mark.controllers
def test_protected_write_command_device_ends_with_the_colour_really_set(world, dirs):
    """A particle-style device drops Write Commands to protected
    characteristics silently: attled must find out (a Read of one, once) and
    pair before writing, or the run would be a success that did not happen."""
    w = start(world, profile="particle")
    r = attled(w, dirs, "--rgb", "6,6,6")
    assert r.returncode == 0, r.stderr
    assert "need an encrypted link" in r.stderr
    w.wait_event({"event": "state", "device": NAME, "rgb": [6, 6, 6]})
    assert not w.find({"event": "write_dropped"}), w.format_events()
    # Warm: the cache remembers it; the bond encrypts up front; no probe, no drop.
    m = w.mark()
    r = attled(w, dirs, "--rgb", "7,7,7")
    assert r.returncode == 0, r.stderr
    assert "with the stored bond" in r.stderr and "need an encrypted link" not in r.stderr
    w.wait_event({"event": "state", "device": NAME, "rgb": [7, 7, 7]}, since=m)
    assert not w.find({"event": "write_dropped"}, since=m)


def test_no_pair_against_a_protected_device_fails_clearly(world, dirs):
    for profile in ("pycom", "particle"):
        w = start(world, profile=profile)
        r = attled(w, dirs, "--rgb", "1,2,3", "--no-pair")
        assert r.returncode == EXIT_SECURITY, r.stderr
        assert "--no-pair" in r.stderr
        assert not w.find({"event": "pairing"})
        assert not w.find({"event": "state", "rgb": [1, 2, 3]})
        w.stop()


@pytest.mark.controllers
def test_security_request_is_answered_by_pairing(world, dirs):
    w = start(world, opts="security_request=1")
    r = attled(w, dirs, "--rgb", "3,3,3", "--trace")
    assert r.returncode == 0, r.stderr
    assert "SMP: Security Request (0x0b)" in r.stderr and "Security Request" in r.stderr
    ev = w.wait_event({"event": "pairing", "device": NAME})
    assert ev["result"] == "complete" and ev["sc"] is True
    w.wait_event({"event": "state", "device": NAME, "rgb": [3, 3, 3]})


def test_general_gatt_read_pairs_when_needed(world, dirs):
    w = start(world)
    handles = w.device(NAME)["handles"]
    red = handles["red"] if isinstance(handles, dict) else None
    assert red, handles
    r = attled(w, dirs, "read", "--char", f"0x{red:04x}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() != ""
    w.wait_event({"event": "pairing", "device": NAME, "result": "complete"})


@pytest.mark.controllers
@pytest.mark.parametrize("pairing", ["sc", "legacy"])
def test_tshark_decodes_a_pairing_capture_with_nothing_malformed(world, dirs, tmp_path, pairing):
    """Wireshark is the judge of the capture: every SMP PDU of the pairing
    and the LE Enable Encryption / Encryption Change are well formed."""
    import subprocess

    from helpers import TSHARK, tshark_malformed

    w = start(world, opts=f"pairing={pairing}")
    cap = tmp_path / "pair.btsnoop"
    r = attled(w, dirs, "--rgb", "1,2,3", "--btsnoop", str(cap))
    assert r.returncode == 0, r.stderr
    assert tshark_malformed(cap) == []
    out = subprocess.run([TSHARK, "-r", str(cap), "-Y", "btsmp", "-T", "fields", "-e", "btsmp.opcode"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    codes = {int(c, 16) for c in out.stdout.split()}
    expected = {0x01, 0x02, 0x03, 0x04} | ({0x0C, 0x0D} if pairing == "sc" else {0x06, 0x07})
    assert expected <= codes, sorted(codes)
    hci = subprocess.run([TSHARK, "-r", str(cap), "-Y", "bthci_cmd.opcode == 0x2019 || bthci_evt.code == 0x08",
                          "-T", "fields", "-e", "frame.number"], capture_output=True, text=True, timeout=60)
    assert len(hci.stdout.split()) >= 2, hci.stdout
    # attled's own decoder reads the capture back, keys masked.
    d = run_attled(["decode", str(cap)])
    assert d.returncode == 0, d.stderr
    assert "SMP: Pairing Request (0x01)" in d.stdout and not leaks(stored_ltk(dirs), d.stdout)


@pytest.mark.controllers
def test_five_runs_on_a_controller_without_public_address_pair_once(world, dirs, controller):
    """Issue 18: with no public address attled keeps one static random
    identity (local-address in the state directory), so the device recognises
    the identity it bonded with: 5 runs, 1 pairing, 5 colours set. The pairing
    run holds the refused colour's other writes: 4 Write Requests for 3 values.
    On Root Canal (a public address per controller) the public address is the
    identity and nothing is stored."""
    bumble = controller == "bumble"
    w = world(devices=[f"{NAME}:pycom:secure=enc"], extra_args=["--zero-host-address"] if bumble else [])
    addresses = set()
    for i in range(5):
        rgb = [10 + i, 20, 30]
        r = attled(w, dirs, "--rgb", ",".join(map(str, rgb)), "--trace")
        assert r.returncode == 0, r.stderr
        m = re.search(r"own address ([0-9A-F:]{17}) \((random, stored identity|public)\)", r.stderr)
        assert m and (m.group(2) == "public") != bumble, r.stderr
        addresses.add(m.group(1))
        if i == 0:
            assert "Insufficient Encryption (0x0f)" in r.stderr
            sent_writes = r.stderr.count("ATT: Write Request (0x12)")
            assert sent_writes <= 4, f"{sent_writes} Write Requests for 3 values:\n{r.stderr}"
        else:
            assert "SMP: Pairing Request (0x01)" not in r.stderr, r.stderr
        w.wait_event({"event": "state", "device": NAME, "rgb": rgb})
    assert len(addresses) == 1, addresses
    pairings = w.find({"event": "pairing", "device": NAME})
    assert len(pairings) == 1, pairings
    kept = os.path.join(dirs["XDG_STATE_HOME"], "attled", "local-address")
    if bumble:
        assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    else:
        assert not os.path.exists(kept)


def test_libcrypto_is_loaded_only_when_a_link_is_secured(world, dirs, tmp_path):
    """Issue 19: a colour written to a device without a bond maps no OpenSSL
    (libcrypto.so.3 is opened on first use); pairing with a device that needs
    encryption loads it and works. The dynamic loader's own record
    (LD_DEBUG=files) says which libraries each run opened."""
    w = world(devices=["Plain:pycom", f"{NAME}:pycom:secure=enc"])

    def run(name: str, tag: str):
        env = dict(dirs, LD_DEBUG="files", LD_DEBUG_OUTPUT=str(tmp_path / tag))
        m = w.mark()
        r = run_attled(["-i", w.transport(), "--name", name, "--rgb", "1,2,3"], env=env)
        w.hosts_gone(m)
        logs = [p for p in tmp_path.iterdir() if p.name.startswith(tag + ".")]
        assert len(logs) == 1, logs
        return r, logs[0].read_text()

    r, loaded = run("Plain", "plain")
    assert r.returncode == 0, r.stderr
    assert "file=libc.so.6" in loaded, loaded[:2000]  # the record is real
    assert "libcrypto" not in loaded and "libssl" not in loaded
    w.wait_event({"event": "state", "device": "Plain", "rgb": [1, 2, 3]})

    r, loaded = run(NAME, "secure")
    assert r.returncode == 0, r.stderr
    assert re.search(r"attled: pair .*bonded", r.stderr), r.stderr
    assert "file=libcrypto.so.3" in loaded
    w.wait_event({"event": "state", "device": NAME, "rgb": [1, 2, 3]})
