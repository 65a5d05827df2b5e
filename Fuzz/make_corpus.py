#!/usr/bin/env python3
"""Cuts the real captures in Fuzz/captures/ into seed inputs for every
harness (the formats are described at the top of each Fuzz/Sources/*.swift).
Seeds are named after their content's hash, so rerunning is idempotent.

    python3 Fuzz/make_corpus.py        (after Fuzz/capture.sh)
    Fuzz/run.sh minimize               (keeps the seeds that add coverage)
"""
from __future__ import annotations

import hashlib
import struct
from pathlib import Path

# Beside this file: found as sys.path[0], the script's own directory.
from esphome_seeds import api_frames_seeds, api_message_seeds, api_noise_seeds
from gatt_server_seeds import gatt_server_seeds
from smp_seeds import smp_responder_seeds, smp_seeds

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
CAPTURES = sorted((HERE / "captures").glob("*.btsnoop"))


def read_btsnoop(path: Path) -> list[tuple[bool, bytes]]:
    """(received, H4 packet) for each record of a datalink-1002 capture."""
    b = path.read_bytes()
    assert b[:8] == b"btsnoop\0" and struct.unpack(">II", b[8:16]) == (1, 1002), path
    out, i = [], 16
    while i + 24 <= len(b):
        _orig, incl, flags, _drops, _ts = struct.unpack(">IIIIQ", b[i:i + 24])
        out.append((flags & 1 == 1, b[i + 24:i + 24 + incl]))
        i += 24 + incl
    return out


seeds: dict[str, dict[str, bytes]] = {}


def seed(harness: str, data: bytes, limit: int = 4096) -> None:
    if not data or len(data) > limit:
        return
    seeds.setdefault(harness, {})[hashlib.sha1(data).hexdigest()[:16]] = data


def chunk(b: bytes) -> bytes:
    return bytes([min(len(b), 255)]) + b[:255]


def l2cap_pdus(acls: list[bytes]) -> list[tuple[int, bytes]]:
    """(cid, payload) of the L2CAP PDUs in a list of ACL packets (one handle)."""
    out, cur = [], None
    for a in acls:
        hf, n = struct.unpack("<HH", a[:4])
        data = a[4:4 + n]
        if (hf >> 12) & 3 != 1:
            cur = bytearray(data)
        elif cur is not None:
            cur += data
        if cur is not None and len(cur) >= 4 and len(cur) == struct.unpack("<H", cur[:2])[0] + 4:
            out.append((struct.unpack("<H", cur[2:4])[0], bytes(cur[4:])))
            cur = None
    return out


# ATT procedure selector (ATT.swift) -> the response opcode that answers its first request.
FIRST_RESPONSE = {0: 0x03, 1: 0x11, 2: 0x07, 3: 0x09, 4: 0x05, 5: 0x0B, 6: 0x09, 7: 0x13, 8: 0x05, 9: 0x0B, 15: 0x03}

for cap in CAPTURES:
    recs = read_btsnoop(cap)
    peer_side = cap.stem.endswith("-peer")
    # h4: each direction of the capture as one byte stream.
    for want in (True, False):
        stream = b"".join(p for rx, p in recs if rx == want)
        seed("h4", stream[:4096])
    # hci-event: single event and command packets, one per kind.
    kinds: set[tuple] = set()
    for rx, p in recs:
        if p[0] == 0x04:
            k = (p[1], p[3] if p[1] == 0x3E else (p[4:6] if p[1] in (0x0E, 0x0F) else None))
        elif p[0] == 0x01:
            k = ("cmd", p[1:3])
        else:
            continue
        if k not in kinds:
            kinds.add(k)
            seed("hci-event", p[1:])
    # adv: every advertising report, as `tag, address, length, data` records.
    reports = b""
    for rx, p in recs:
        if p[0] != 0x04 or p[1] != 0x3E:
            continue
        ev = p[3:]
        if ev[0] == 0x02 and ev[1] == 1:  # legacy, one report
            t, dl = ev[2], ev[10]
            rec = bytes([t & 7, 0]) + chunk(ev[11:11 + dl])
        elif ev[0] == 0x0D and ev[1] == 1:  # extended, one report
            et = struct.unpack("<H", ev[2:4])[0]
            dl = ev[25]
            rec = bytes([0x80 | (et & 0x7F), 0]) + chunk(ev[26:26 + dl])
        else:
            continue
        seed("adv", rec)
        reports += rec
    seed("adv", reports)
    # l2cap, att, signalling: the ACL traffic each side received.
    acl_rx = [p[1:] for rx, p in recs if rx and p[0] == 0x02]
    acl_tx = [p[1:] for rx, p in recs if not rx and p[0] == 0x02]
    for acls in (acl_rx, acl_tx):
        if not acls:
            continue
        script = bytes([26])  # 27-byte outgoing fragments, one buffer
        for a in acls:
            hf, n = struct.unpack("<HH", a[:4])
            script += bytes([(hf >> 12) & 0x0F]) + chunk(a[4:4 + n])
        seed("l2cap", script)
    for acls in (acl_rx, acl_tx):
        pdus = l2cap_pdus(acls)
        att = [pl for cid, pl in pdus if cid == 4]
        for pl in att:
            seed("att", bytes([0x40 | 9]) + chunk(pl))  # one PDU, decode + unsolicited
        for sel, op in FIRST_RESPONSE.items():
            first = next((i for i, pl in enumerate(att) if pl and pl[0] == op), None)
            if first is not None:
                seed("att", bytes([0xC0 | sel]) + b"".join(chunk(pl) for pl in att[first:]))
        for cid, pl in pdus:
            if cid == 5:
                seed("signalling", b"\x00" + pl)
                seed("l2cap", bytes([26, 0xC2 + 1]) + chunk(pl))
            elif cid == 6:
                seed("signalling", b"\x01" + pl)
                seed("l2cap", bytes([26, 0xC2 + 2]) + chunk(pl))
    # gatt-server: what attled, the client, sent on ATT (its own side's capture), against
    # the board the capture ran with (MTU 517): records `0, len, PDU`.
    if not peer_side:
        db = 1 if "particle" in cap.stem else 2 if "harness" in cap.stem else 0
        script = bytes([db | 0x0C])
        for cid, pl in l2cap_pdus(acl_tx):
            if cid == 4 and len(script) + 2 + len(pl) <= 4096:
                script += b"\x00" + chunk(pl)
        if len(script) > 1:
            seed("gatt-server", script)
    # trace: the capture's packets in order (tag: type index, bit 3 sent).
    types = {0x01: 0, 0x02: 1, 0x03: 2, 0x04: 3, 0x05: 4}
    script = b""
    for rx, p in recs:
        rec = bytes([types.get(p[0], 5) | (0 if rx else 8)]) + chunk(p[1:])
        if len(script) + len(rec) > 1024:
            seed("trace", script)
            script = b""
        script += rec
    seed("trace", script)

# Signalling and SMP commands the captures do not hold (Core Vol 3 Part A 4, Part H 3.5).
for hexs in ["12 02 08 00 06 00 06 00 00 00 0a 00",      # update request at the limits
             "12 03 07 00 06 00 06 00 00 00 0a",         # update request one byte short
             "06 04 04 00 40 00 40 00",                  # disconnection request
             "14 05 0a 00 80 00 40 00 17 00 17 00 05 00",  # LE credit based connection request
             "01 06 02 00 00 00",                        # command reject
             "0a 00 00 00"]:                             # unknown code, identifier 0
    seed("signalling", b"\x00" + bytes.fromhex(hexs))
for hexs in ["01 03 00 01 10 07 07", "02 03 00 01 10 07 07", "0b 01", "05 05", "0c"]:
    seed("signalling", b"\x01" + bytes.fromhex(hexs))

# The command lines README and tests use (NUL-separated; '@' = ATTLED_TRANSPORT).
for line in ["-i tcp:127.0.0.1:9000 --name CassarTech --rgb 255,0,0",
             "--rgb #ff8000 --profile particle --address C0:11:22:33:44:55,random",
             "send --name Harness --value 0x0103 --char 19b10011-e8f2-537e-4f6c-d104768a1214",
             "listen --count 3 --json -q --trace=hex",
             "scan --passive --extended --timeout 2.5",
             "gatt --btsnoop /tmp/x.btsnoop --connect-timeout 500 --att-timeout 100",
             "decode - --filter att",
             "--service 2a00 --red 2a01 --green 0x2A02 --blue 2a03 --rgb red",
             "get --no-cache --trust-cache -t 1e3",
             "@serial:/dev/ttyACM0,115200,rtscts --rgb off",
             "help", "--version", "-h"]:
    seed("cli", line.replace(" ", "\0").encode())
for spec in ["hci0", "hci65535", "tcp:127.0.0.1:9000", "tcp:[::1]:1", "unix:/run/attled.sock",
             "serial:/dev/ttyACM0", "serial:/dev/ttyUSB0,921600,rtscts", "uart:/dev/ttyS0,flow",
             "tcp:localhost:0", "bogus:x", "hci",
             # a Prepend scalar (U+0600) fused with the comma after it (a finding, now a unit test)
             "uart:/vt:/v//t:/v+k++++\u0600", "serial:/dev/tty\u0600,9600,rtscts", "tcp:host\u0600:9000"]:
    seed("transport-spec", spec.encode())
# json and ha-command: MQTT payloads, Home Assistant's commands as its documentation
# gives them and as the gateway's tests send them, and JSON's corners.
COMMANDS = [
    '{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50}}',
    '{"state":"OFF"}', '{"state":"ON"}', '{"state":"ON","transition":2.5}', '{"state":"ON","flash":2}',
    '{"state":"ON","color":{"r":256,"g":0,"b":0}}', '{"state":"ON","brightness":1.5}', '{"state":"BLINK"}',
    '{"brightness":10}', '"ON"', '{not json', '{"state":"ON","bogus":1}', '{"state":"ON","brightness":128.0}',
]
for t in COMMANDS:
    seed("ha-command", t.encode())
for t in COMMANDS + [
    '[1,-0,0.5,-1e-300,1E+308,123456789012345678901234567890,true,false,null]',
    '{"a":{"b":[{"c":"\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\\\/\\b\\f"}]}}', '""', '"\\u0000"', '  {  }  ', '[[],{}]',
    '{"name":null,"unique_id":"attled_c01122334455_light","schema":"json","supported_color_modes":["rgb"]}',
    '9223372036854775807', '-9223372036854775808', '9223372036854775808', '1.7976931348623157e308', '5e-324',
]:
    seed("json", t.encode())
for cap in CAPTURES:
    seed("btsnoop", cap.read_bytes(), limit=1 << 20)
# SMP: no capture pairs, so the seeds are written by hand (smp_seeds.py).
for s in smp_seeds():
    seed("smp", s)
for s in smp_responder_seeds():
    seed("smp-responder", s)
# gatt-server: a client's requests written by hand as well (gatt_server_seeds.py).
for s in gatt_server_seeds():
    seed("gatt-server", s)
# The ESPHome API (attled proxy): messages and the vectors' Noise handshake (esphome_seeds.py).
for s in api_frames_seeds():
    seed("api-frames", s, limit=16384)
for s in api_message_seeds():
    seed("api-message", s)
for s in api_noise_seeds():
    seed("api-noise", s)

for harness, files in sorted(seeds.items()):
    d = CORPUS / harness
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    for name, data in files.items():
        (d / name).write_bytes(data)
    print(f"{harness:15} {len(files):4} seeds")
