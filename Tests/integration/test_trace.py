"""--trace, --btsnoop and attled decode (issue: tracing)."""

from __future__ import annotations

import re

import pytest

from conftest import run_attled


def packets(trace: str) -> list[list[str]]:
    """Split a trace into packet blocks (header line + indented lines)."""
    blocks: list[list[str]] = []
    for line in trace.splitlines():
        if line.startswith(("< ", "> ")):
            blocks.append([line])
        elif blocks and line.startswith("      "):  # packet fields; the timing summary is indented 2
            blocks[-1].append(line)
    return blocks


def normalise(trace: str, random_address: str | None) -> list[str]:
    """The packet sequence without what legitimately differs between runs:
    timestamps and numbering, our generated random address, advertising
    reports (their count depends on timing) and Number Of Completed Packets
    (the controller may send it before or after the ATT response)."""
    out = []
    for b in packets(trace):
        text = "\n".join(b)
        if "Advertising Report" in text or "Number of Completed Packets" in text:
            continue
        text = re.sub(r"  #\d+ \d+\.\d+$", "", text, flags=re.M)
        if random_address:
            text = text.replace(random_address, "<own>")
        text = re.sub(r"(Address: )[0-9A-F:]{17}( \(static\))", r"\1<own>\2", text)
        out.append(text)
    return out


def own_address(stderr: str) -> str | None:
    m = re.search(r"own address ([0-9A-F:]{17})", stderr)
    return m.group(1) if m else None


def test_trace_is_identical_on_every_transport(world):
    traces = {}
    for host in ("tcp", "unix", "pty"):
        w = world(devices=["CassarTech:pycom"], hosts=[host], extra_args=["--zero-host-address"])
        r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "255,0,0", "--trace"])
        assert r.returncode == 0, r.stderr
        traces[host] = normalise(r.stderr, own_address(r.stderr))
        w.stop()
    assert traces["tcp"] == traces["unix"] == traces["pty"]
    # and it is a whole run: init, connect, ATT, disconnect
    joined = "\n".join(traces["tcp"])
    for needle in ("Reset (0x0c03)", "LE Create Connection (0x200d)", "Find By Type Value Request (0x06)",
                   "Write Request (0x12)", "Disconnect (0x0406)"):
        assert needle in joined


@pytest.mark.controllers
def test_trace_hex_and_timing_summary(world):
    w = world(devices=["CassarTech:pycom"])
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "1,2,3", "--trace=hex"])
    assert r.returncode == 0, r.stderr
    assert "        | 01 03 0c 00" in r.stderr  # raw H4 bytes of Reset
    assert re.search(r"ATT transactions: 7 \(\+ 0 without response\), MTU 517", r.stderr)
    assert re.search(r"Write Request\s+[\d.]+\s+ms\s+-> Write Response", r.stderr)
    assert re.search(r"connection interval [\d.]+ ms", r.stderr)


@pytest.mark.controllers
def test_btsnoop_capture_decodes_to_the_same_trace(world, tmp_path):
    w = world(devices=["CassarTech:particle"])
    cap = tmp_path / "run.btsnoop"
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "7,8,9", "--trace", "--btsnoop", str(cap)])
    assert r.returncode == 0, r.stderr
    d = run_attled(["decode", str(cap)])
    assert d.returncode == 0, d.stderr
    live = [b[0].split("  #")[0] for b in packets(r.stderr)]
    replay = [b[0].split("  #")[0] for b in packets(d.stdout)]
    assert live == replay
    assert [b[1:] for b in packets(r.stderr)] == [b[1:] for b in packets(d.stdout)]

    att = run_attled(["decode", "--filter", "att", str(cap)])
    blocks = packets(att.stdout)
    assert blocks and all(any("ATT:" in l for l in b) for b in blocks)
    assert sum("Write Command (0x52)" in "\n".join(b) for b in blocks) == 3



def test_decode_reads_stdin_and_reports_truncation(world, tmp_path):
    import subprocess
    from conftest import ATTLED
    w = world(devices=["CassarTech:pycom"])
    cap = tmp_path / "run.btsnoop"
    r = run_attled(["-i", w.transport(), "--name", "CassarTech", "--rgb", "7,8,9", "-q", "--btsnoop", str(cap)])
    assert r.returncode == 0, r.stderr
    data = cap.read_bytes()
    p = subprocess.run([str(ATTLED), "decode", "-"], input=data, capture_output=True, timeout=10)
    assert p.returncode == 0 and b"Write Request (0x12)" in p.stdout
    # Cut inside the 10th record: the first 9 are printed, then the error names record 10.
    off, n = 16, 0
    while n < 9:
        incl = int.from_bytes(data[off + 4:off + 8], "big")
        off += 24 + incl
        n += 1
    cut = tmp_path / "cut.btsnoop"
    cut.write_bytes(data[:off + 30])
    d = run_attled(["decode", str(cut)])
    assert d.returncode == 65
    assert len(packets(d.stdout)) == 9
    assert "record 10" in d.stderr and "truncated" in d.stderr


def test_decode_rejects_garbage(tmp_path):
    f = tmp_path / "garbage.bin"
    f.write_bytes(b"not a capture at all")
    d = run_attled(["decode", str(f)])
    assert d.returncode == 65 and "not a btsnoop file" in d.stderr
