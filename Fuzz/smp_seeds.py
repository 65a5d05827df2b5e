#!/usr/bin/env python3
"""Seeds for the smp harness (format at the top of Fuzz/Sources/SMP.swift).
The captures hold no pairing, so these are written by hand from Core Vol 3
Part H 3.5 and 3.6. make_corpus.py includes them; run alone, this rewrites
corpus/smp only:

    python3 Fuzz/smp_seeds.py
"""
from __future__ import annotations

import hashlib
from pathlib import Path


def rec(op: int, hexs: str) -> bytes:
    b = bytes.fromhex(hexs)
    return bytes([op, len(b)]) + b


def smp_seeds() -> list[bytes]:
    pdus = [
        "02 03 00 09 10 00 02", "02 03 00 01 10 00 03", "02 00 01 2d 07 00 07",   # responses: SC, legacy, odd
        "03" + " 11" * 16, "04" + " 22" * 16, "05 0b", "05 77", "05",
        "06" + " 33" * 16, "07 34 12 08 07 06 05 04 03 02 01", "08" + " 44" * 16,
        "09 01 66 55 44 33 22 c1", "0a" + " 55" * 16, "0b 0d", "0d" + " 66" * 16, "0e 01", "0f aa",
        "0c" + " 00" * 64,
    ]
    out = []
    # raw: one PDU each, then a script through both pairing methods' PDU order.
    for p in pdus:
        out.append(b"\x00" + rec(0, p))
    out.append(b"\x00" + rec(0, pdus[1]) + rec(0, pdus[3]) + rec(0, pdus[4]) + rec(1, "00")
               + rec(0, pdus[8]) + rec(0, pdus[9]) + rec(0, pdus[10]) + rec(0, pdus[11]))
    out.append(b"\x00" + rec(0, pdus[0]) + rec(0, pdus[17]) + rec(2, "") + rec(3, "08"))
    out.append(b"\x00" + rec(0, pdus[1]) + rec(0, pdus[3]) + rec(1, "06"))
    # peer: an honest responder, Secure Connections and legacy, with and without keys both ways.
    for mode, params in [(0x01, "03 00 09 10 00 02"), (0x03, "03 00 01 10 00 03"), (0x19, "03 00 09 10 02 07"),
                         (0x1B, "03 00 01 07 02 07"), (0x05, "03 00 09 0c 00 00"), (0x21, "03 00 01 10 00 00")]:
        out.append(bytes([mode]) + bytes.fromhex(params))
    # peer, tampered: a flipped confirm, an off-curve key, keys before the last PDU.
    out.append(b"\x01" + bytes.fromhex("03 00 09 10 00 02") + rec(0, "") + rec(0, "") + rec(2, "01 02"))
    out.append(b"\x01" + bytes.fromhex("03 00 09 10 00 02") + rec(0, "") + rec(2, "40"))
    out.append(b"\x03" + bytes.fromhex("03 00 01 10 00 03") + rec(0, "") + rec(0, "") + rec(3, "08" + " 44" * 16))
    return out


def smp_responder_seeds() -> list[bytes]:
    """Seeds for the smp-responder harness (format at the top of Fuzz/Sources/SMPResponder.swift)."""
    req_sc, req_legacy = "01 03 00 09 10 03 03", "01 03 00 01 10 03 03"
    out = []
    # raw: a request of each kind, a Security Request first, odd requests, stray PDUs.
    for mode in (0x00, 0x04, 0x08, 0x10, 0x20):
        out.append(bytes([mode]) + rec(0, req_sc))
        out.append(bytes([mode]) + rec(0, req_legacy) + rec(0, "03" + " 11" * 16) + rec(0, "04" + " 22" * 16))
    out.append(b"\x00" + rec(4, "") + rec(0, req_sc) + rec(0, "0c" + " 00" * 64) + rec(2, ""))
    out.append(b"\x00" + rec(4, "") + rec(1, "00") + rec(0, req_legacy) + rec(3, "08"))
    for p in ("01 05 00 09 10 03 03", "01 03 02 09 11 03 03", "01 03 01 2d 06 0f 0f", "02 03 00 09 10 03 03",
              "0b 09", "05 05", "06" + " 33" * 16, "0d" + " 66" * 16, "42"):
        out.append(b"\x00" + rec(0, p))
    # peer: attled's initiator, Secure Connections and legacy, with and without our identity, SC Only, no bonding.
    for mode in (0x01, 0x03, 0x11, 0x13, 0x09, 0x0B, 0x21, 0x15):
        out.append(bytes([mode]))
    # peer, tampered: a flipped check value, keys before the last PDU, a replaced request.
    out.append(b"\x01" + rec(0, "") + rec(0, "") + rec(0, "") + rec(2, "01 02"))
    out.append(b"\x01" + rec(0, "") + rec(2, "40"))
    out.append(b"\x03" + rec(0, "") + rec(0, "") + rec(3, "08" + " 44" * 16))
    out.append(b"\x13" + rec(1, req_sc))
    return out


def write_corpus(harness: str, seeds: list[bytes]) -> None:
    """Replaces corpus/<harness> with ``seeds``, each named by its hash."""
    d = Path(__file__).resolve().parent / "corpus" / harness
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    for s in seeds:
        (d / hashlib.sha1(s).hexdigest()[:16]).write_bytes(s)
    print(f"{harness} {len(list(d.iterdir()))} seeds")


if __name__ == "__main__":
    write_corpus("smp", smp_seeds())
    write_corpus("smp-responder", smp_responder_seeds())
