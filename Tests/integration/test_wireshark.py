"""Wireshark is the judge of attled's captures (issue: tracing).

tshark must find no malformed packet in attled's own btsnoop captures of real
runs, and the ATT opcodes, handles and values it decodes must equal the ones
attled's decoder prints for the same file, packet by packet. A capture written
by Bumble's snooper on the peripheral side decodes with `attled decode`
without error and agrees with tshark the same way.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import run_attled
from helpers import TSHARK, tshark_malformed


def tshark_att(cap) -> dict[int, dict]:
    r = subprocess.run([TSHARK, "-r", str(cap), "-Y", "btatt", "-T", "fields", "-e", "frame.number",
                        "-e", "btatt.opcode", "-e", "btatt.handle", "-e", "btatt.value"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        num, op, handle, value = (line.split("\t") + ["", "", "", ""])[:4]
        out[int(num)] = {"op": int(op, 16), "handles": [int(h, 16) for h in handle.split(",") if h],
                         "value": value.replace(":", "")}
    return out


def attled_att(cap) -> dict[int, dict]:
    d = run_attled(["decode", "--filter", "att", str(cap)])
    assert d.returncode == 0, d.stderr
    out = {}
    block: list[str] = []
    def flush():
        if not block:
            return
        num = int(re.search(r"  #(\d+) ", block[0]).group(1))
        text = "\n".join(block)
        m = re.search(r"ATT: .* \(0x([0-9a-f]{2})\) len", text)
        handles = [int(h, 16) for h in re.findall(r"Handle: 0x([0-9a-f]{4})", text)]
        v = re.search(r"(?:Data|Value): ([0-9a-f ]+)", text)
        out[num] = {"op": int(m.group(1), 16), "handles": handles, "value": v.group(1).replace(" ", "") if v else ""}
    for line in d.stdout.splitlines():
        if line.startswith(("< ", "> ")):
            flush()
            block = [line]
        elif line.startswith("      "):
            block.append(line)
    flush()
    return out


def compare(cap) -> int:
    ours, theirs = attled_att(cap), tshark_att(cap)
    assert sorted(ours) == sorted(theirs), (ours, theirs)
    for n in theirs:
        assert ours[n]["op"] == theirs[n]["op"], (n, ours[n], theirs[n])
        if theirs[n]["op"] in (0x0A, 0x0C, 0x12, 0x52, 0x1B, 0x1D):  # requests/commands naming one handle
            assert ours[n]["handles"][:1] == theirs[n]["handles"][:1], (n, ours[n], theirs[n])
        # values (tshark decodes a CCCD write as its bit field, not btatt.value)
        if theirs[n]["op"] in (0x0B, 0x12, 0x52, 0x1B, 0x1D) and theirs[n]["value"]:
            assert ours[n]["value"] == theirs[n]["value"], (n, ours[n], theirs[n])
    return len(theirs)


@pytest.mark.parametrize("profile,args,device", [
    ("pycom", ["--rgb", "255,0,0"], "CassarTech:pycom"),
    ("particle", ["--rgb", "0,128,255"], "CassarTech:particle"),
    ("pycom-get", ["get"], "CassarTech:pycom:init=5,6,7"),
    ("harness", ["listen", "--count", "2"], "CassarTech:harness:notify_every=30"),
])
def test_tshark_agrees_with_attled_decode(world, tmp_path, profile, args, device):
    dev_cap = str(tmp_path / "dev{i}.btsnoop")
    w = world(devices=[device], extra_args=["--device-snoop", dev_cap])
    cap = tmp_path / "attled.btsnoop"
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", *args, "--btsnoop", str(cap), "-q"])
    assert r.returncode == 0, r.stderr
    assert tshark_malformed(cap) == []
    assert compare(cap) >= 4
    # Bumble's capture of the same run, from the peripheral's side (closed when vworld exits).
    w.wait_event({"event": "disconnected"})
    w.stop()
    peer_cap = tmp_path / "dev0.btsnoop"
    d = run_attled(["decode", str(peer_cap)])
    assert d.returncode == 0, d.stderr
    assert compare(peer_cap) >= 4
