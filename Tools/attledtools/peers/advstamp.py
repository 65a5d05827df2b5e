"""Stamped advertisements (device option ``stamp=1``): when each advertisement
went on the air, in its own data, so a listener can tell how long it took to
reach it.

A device with ``stamp=1`` advertises one more AD structure, last, Manufacturer
Specific Data of company 0xFFFF (the Bluetooth SIG's value for tests):

    10 ff ff ff 54 SEQ(u32 LE) NS(u64 LE)        17 bytes

written as zeros by the device and filled in by vworld's air (drivers/air/link.py)
as the device's controller hands each advertising PDU to the air: SEQ counts the
device's advertising events from 1, NS is time.monotonic_ns() (CLOCK_MONOTONIC,
the same clock in every process of this machine) at that moment. The scan
response Bumble's controller reports beside each advertisement carries the same
data, so the same stamp.

Bumble's controllers only (the air is vworld's LocalLink; Root Canal's air
is its own).
"""

from __future__ import annotations

import struct

STAMP_COMPANY = 0xFFFF
STAMP_TAG = 0x54  # "T"
_HEAD = bytes([16, 0xFF]) + STAMP_COMPANY.to_bytes(2, "little") + bytes([STAMP_TAG])
STAMP_LEN = len(_HEAD) + 12  # 17
_BODY = struct.Struct("<IQ")


def placeholder() -> bytes:
    """The AD structure a stamp=1 device advertises, not yet stamped."""
    return _HEAD + bytes(12)


def is_stamped_data(data: bytes) -> bool:
    """True when ``data`` ends with the stamp's AD structure."""
    return len(data) >= STAMP_LEN and data[-STAMP_LEN:-12] == _HEAD


def stamp(data: bytes, seq: int, ns: int) -> bytes:
    """``data`` (ending with the stamp AD) with SEQ and NS filled in."""
    return data[:-12] + _BODY.pack(seq & 0xFFFFFFFF, ns)


def read_stamp(data: bytes) -> tuple[int, int] | None:
    """(SEQ, NS) of the stamp AD anywhere in ``data`` (walking its AD
    structures), or None when there is none or it was never filled in."""
    i = 0
    while i + 1 < len(data):
        n = data[i]
        if n == 0:
            break
        if data[i:i + 5] == _HEAD and i + 1 + n <= len(data):
            seq, ns = _BODY.unpack_from(data, i + 5)
            return (seq, ns) if seq else None
        i += 1 + n
    return None
