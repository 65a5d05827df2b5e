#!/usr/bin/env python3
"""Seeds for the gatt-server harness (format at the top of
Fuzz/Sources/GATTServer.swift): a client's ATT PDUs written by hand from
Core Vol 3 Part F 3.4 and Part G 4, against the boards' databases (pycom
0x0010/0x0012/0x0014 the LED values; harness 0x0010 the command, 0x0012 the
button and 0x0013 its CCCD; all: 0x0003 Device Name, 0x0008 Service Changed
and 0x0009 its CCCD, 0x000B Client Supported Features, 0x000D Database Hash)
and the test database (0x0011 512 bytes read+write, 0x0013 read-only,
0x0015 encrypted, 0x0018 notify+indicate with CCCD 0x0019, 0x001B write
without response, 0x001D write-only, 0x001F 128-bit, 0x0023 in a secondary
service, 0x0042 at a given handle with CCCD 0x0045). make_corpus.py
includes them, with the client PDUs of the captures; run alone, this
rewrites corpus/gatt-server with the hand-written seeds only:

    python3 Fuzz/gatt_server_seeds.py
"""
from __future__ import annotations


PYCOM, PARTICLE, HARNESS, TEST = 0, 1, 2, 3
MTU23, MTU24, MTU185, MTU517 = 0 << 2, 1 << 2, 2 << 2, 3 << 2
ENCRYPTED, BONDED, SECURE, RESTORED = 0x10, 0x20, 0x40, 0x80


def rec(op: int, hexs: str) -> bytes:
    """One record: op, length, bytes (op 0: a client PDU)."""
    b = bytes.fromhex(hexs)
    assert len(b) <= 255
    return bytes([op, len(b)]) + b


def pdus(*hexs: str) -> bytes:
    return b"".join(rec(0, h) for h in hexs)


# What `attled gatt` asks: MTU, services, characteristics, descriptors.
DISCOVERY = [
    "02 05 02",                                   # Exchange MTU 517
    "10 01 00 ff ff 00 28", "10 0e 00 ff ff 00 28", "10 15 00 ff ff 00 28",  # primary services
    "08 01 00 05 00 03 28", "08 06 00 0d 00 03 28", "08 0e 00 ff ff 03 28", "08 13 00 ff ff 03 28",  # characteristics
    "04 09 00 09 00", "04 13 00 14 00", "04 01 00 ff ff",  # descriptors
]


def gatt_server_seeds() -> list[bytes]:
    out = []
    # Discovery on every database, at each MTU.
    for db in (PYCOM, PARTICLE, HARNESS, TEST):
        out.append(bytes([db | MTU517]) + pdus(*DISCOVERY))
    out.append(bytes([TEST | MTU23]) + pdus(*DISCOVERY[1:]))
    out.append(bytes([TEST | MTU185]) + pdus("02 b9 00", "10 0e 00 ff ff 01 28", "08 0e 00 21 00 02 28",
                                             "06 01 00 ff ff 00 28 f0 ff", "06 01 00 ff ff 00 28 00 18",
                                             "04 0e 00 ff ff", "04 30 00 4f 00", "10 22 00 ff ff 00 28"))
    # Reads: Read, Read Blob, Read Multiple (fixed and variable), Read By Type (Database Hash, Device Name).
    out.append(bytes([PYCOM | MTU23]) + pdus("0a 03 00", "0c 03 00 05 00", "0c 03 00 ff 00", "0e 03 00 05 00",
                                             "0e 10 00 12 00 14 00", "20 03 00 0d 00", "08 01 00 ff ff 2a 2b",
                                             "08 01 00 ff ff 00 2a", "0a 08 00", "0a 00 00", "0a 99 00"))
    out.append(bytes([TEST | MTU24]) + pdus("0a 11 00", "0c 11 00 16 00", "0c 11 00 f4 01", "0c 11 00 00 02",
                                            "0c 11 00 01 02", "0e 11 00 13 00", "20 11 00 13 00 18 00",
                                            "08 01 00 ff ff 01 2a", "0a 1d 00", "0a 16 00"))
    # Writes: the LED value (request and command), the harness command, write-only, too long.
    out.append(bytes([PYCOM | MTU23]) + pdus("12 10 00 ff", "12 12 00 80", "52 14 00 40", "0a 10 00",
                                             "12 10 00 01 02", "12 03 00 41", "52 03 00 41"))
    out.append(bytes([PARTICLE | MTU23]) + pdus("52 10 00 ff", "52 12 00 00", "12 14 00 7f", "0e 10 00 12 00 14 00"))
    out.append(bytes([HARNESS | MTU23]) + pdus("12 13 00 01 00", "12 10 00 01", "52 10 00 02", "12 13 00 00 00",
                                               "12 10 00 03", "0a 12 00"))
    out.append(bytes([TEST | MTU185]) + pdus("12 1d 00 01 02 03 04", "12 1d 00 01 02 03 04 05", "52 1b 00 " + "aa " * 20,
                                             "d2 1b 00 01" + " 00" * 12, "12 1f 00 08 07 06 05 04 03 02 01",
                                             "12 42 00 d2 d3", "12 13 00 00", "12 11 00 " + "55 " * 180))
    # Prepare + Execute Write: a long value in parts, a cancelled queue, a bad offset, an odd flag.
    out.append(bytes([TEST | MTU23]) + pdus("16 11 00 00 00 " + "01 " * 18, "16 11 00 12 00 " + "02 " * 18,
                                            "16 11 00 00 02 ff", "18 01", "0c 11 00 00 00",
                                            "16 11 00 00 00 aa", "18 00", "16 11 00 01 02 ee", "18 01",
                                            "16 13 00 00 00 01", "16 1f 00 07 00 01 02", "18 01", "18 02"))
    out.append(bytes([PYCOM | MTU23]) + pdus("16 10 00 00 00 42", "18 01", "16 10 00 00 00 01 02", "18 01", "0a 10 00"))
    # CCCDs: Service Changed (02 00) and indications confirmed, notify (01 00) on the test database.
    out.append(bytes([PYCOM | MTU23]) + pdus("12 09 00 02 00") + rec(6, "0e 00 ff ff") + rec(6, "01 00 ff ff")
               + pdus("1e") + pdus("1e", "1e 00", "12 09 00 00 00"))
    out.append(bytes([TEST | MTU517]) + pdus("02 05 02", "12 19 00 01 00") + rec(4, "08 11 22") + rec(5, "08 33")
               + pdus("12 19 00 02 00") + rec(4, "08 44") + rec(4, "08 55") + pdus("1e") + pdus("1e")
               + pdus("12 45 00 01 00", "12 20 00 01 00") + rec(4, "0d 99") + rec(4, "0b 01 02") + pdus("0a 19 00"))
    out.append(bytes([HARNESS | MTU23 | RESTORED]) + pdus("12 10 00 05") + rec(6, "") + pdus("1e"))
    # Client Supported Features: set, then a bit cleared (Value Not Allowed); a wrong CCCD length.
    out.append(bytes([TEST | MTU23]) + pdus("12 0b 00 01", "0a 0b 00", "12 0b 00 00", "12 0b 00 01 00", "12 19 00 01",
                                            "12 19 00 01 00 00"))
    # Security: encrypted values refused on a plain link (bonded or not), then the link is encrypted.
    out.append(bytes([TEST | MTU23]) + pdus("0a 15 00", "12 15 00 01", "0e 13 00 15 00", "08 14 00 16 00 f3 ff")
               + rec(7, "01") + pdus("0a 15 00", "12 15 00 01"))
    out.append(bytes([PYCOM | MTU23 | SECURE | BONDED]) + pdus("0a 10 00", "12 10 00 01", "0a 03 00") + rec(7, "")
               + pdus("0a 10 00", "12 10 00 01"))
    out.append(bytes([TEST | MTU23 | SECURE | ENCRYPTED | RESTORED]) + rec(4, "08 01") + pdus("1e") + rec(4, "0b 02"))
    # Malformed and short PDUs, unknown requests and commands, PDUs a server never gets.
    out.append(bytes([PYCOM | MTU23]) + pdus("", "0a 03", "12", "04 01 00", "10 01 00 ff ff 00", "18 05",
                                             "0e 03 00", "20 03 00", "02 05", "0a 03 00 00"))
    out.append(bytes([PYCOM | MTU23]) + pdus("3f 01 02", "7f 00", "c0", "01 0a 03 00 0a", "0b 00", "1b 03 00 00",
                                             "1d 03 00 00", "1e", "23 03 00 01 00 00"))
    out.append(bytes([TEST | MTU23]) + pdus("08 01 00 ff ff " + "00 " * 15, "10 01 00 ff ff 00 28 00",
                                            "12 11 00 " + "01 " * 40, "16 11 00 00 00 " + "01 " * 40))
    return out


if __name__ == "__main__":
    from smp_seeds import write_corpus
    write_corpus("gatt-server", gatt_server_seeds())
