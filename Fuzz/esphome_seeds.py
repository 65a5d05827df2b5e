#!/usr/bin/env python3
"""Seeds for the api-frames, api-message and api-noise harnesses (formats at
the top of Fuzz/Sources/API.swift and Fuzz/Sources/APINoise.swift). The
Bluetooth captures hold no ESPHome API traffic, so the messages are written
here from api.proto's field numbers (the declarations in
Sources/ESPHomeAPI), as aioesphomeapi and attled proxy exchange them
(PROTOCOL.md section 13), plus protobuf's corners: packed and unpacked
repeated fields, padded varints, merged embedded messages, unknown fields.
The Noise seeds are the test vectors' real client handshake
(Tests/BLEStackTests/ESPHomeAPINoiseVectors.swift, read from there).
make_corpus.py includes them; run alone, this rewrites corpus/api-* only:

    python3 Fuzz/esphome_seeds.py
"""
from __future__ import annotations

import re
import struct
from pathlib import Path

# Beside this file: found as sys.path[0], the script's own directory.
from smp_seeds import write_corpus

HERE = Path(__file__).resolve().parent
VECTORS = HERE.parent / "Tests" / "BLEStackTests" / "ESPHomeAPINoiseVectors.swift"


def vector(name: str) -> bytes:
    m = re.search(rf'static let {name} = hex\("([0-9a-f ]+)"\)', VECTORS.read_text())
    assert m, f"{name} not in {VECTORS}"
    return bytes.fromhex(m.group(1))


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63) if v < 0 else v << 1


def f_varint(n: int, v: int) -> bytes:
    return varint(n << 3) + varint(v)


def f_len(n: int, b: bytes | str) -> bytes:
    b = b.encode() if isinstance(b, str) else b
    return varint(n << 3 | 2) + varint(len(b)) + b


def f_fixed32(n: int, v: int) -> bytes:
    return varint(n << 3 | 5) + struct.pack("<I", v)


ADDR = 0xC01122334455
UUID_128 = [0x0000180F00001000, 0x800000805F9B34FB]  # as ESPHome sends a 128-bit UUID: two uint64


def uuid(n: int) -> bytes:
    return b"".join(f_varint(n, u) for u in UUID_128)


descriptor = uuid(1) + f_varint(2, 0x12)
characteristic = uuid(1) + f_varint(2, 0x10) + f_varint(3, 0x12) + f_len(4, descriptor)
service = uuid(1) + f_varint(2, 0x0E) + f_len(3, characteristic) + f_len(3, f_varint(5, 0x2A19) + f_varint(2, 0x14))
dst = f_varint(1, zigzag(7200)) + f_varint(2, 0) + f_varint(3, 1) + f_varint(4, 3) + f_varint(5, 5) + f_varint(6, 0)
advert = f_varint(1, ADDR) + f_varint(2, zigzag(-50)) + f_varint(3, 1) + f_len(4, bytes.fromhex("0201060b0943617373617254656368"))
adverts = f_len(1, advert) + f_len(1, advert)

# (type, payload): one or more of every declared message, as the peers send them.
MESSAGES: list[tuple[int, bytes]] = [
    (1, vector("clientPayload1")),                                        # HelloRequest
    (2, vector("serverPayload1")),                                        # HelloResponse
    (3, b""), (3, f_len(1, "secret")), (4, b""), (4, f_varint(1, 1)),     # ConnectRequest / Response
    (5, b""), (5, f_varint(1, 1)), (6, b""), (7, b""), (8, b""), (9, b""),
    (10, f_len(2, "attled-proxy") + f_len(3, "F0:F1:F2:F3:F4:01") + f_len(4, "2025.4.0") + f_len(6, "attled")
     + f_len(12, "attled") + f_len(13, "attled proxy") + f_varint(15, 0x3F) + f_len(18, "F0:F1:F2:F3:F4:01") + f_varint(19, 1)),
    (11, b""), (19, b""), (20, b""), (34, b""), (38, b""), (36, b""),
    (37, f_fixed32(1, 1735689600) + f_len(2, "CET-1CEST,M3.5.0,M10.5.0/3")
     + f_len(3, f_varint(1, zigzag(3600)) + f_varint(2, zigzag(7200)) + f_len(3, dst) + f_len(4, dst))),
    (66, vector("clientPayload2")), (87, b""),
    (93, vector("serverPayload2")), (93, adverts),
    (68, f_varint(1, ADDR) + f_varint(2, 4) + f_varint(3, 1) + f_varint(4, 1)),  # connect v3 with cache
    (68, f_varint(1, ADDR) + f_varint(2, 1)),
    (69, f_varint(1, ADDR) + f_varint(2, 1) + f_varint(3, 247)), (69, f_varint(1, ADDR) + f_varint(4, 0x3E)),
    (80, b""), (81, f_varint(1, 8) + f_varint(2, 9) + f_varint(3, ADDR)),
    (81, f_varint(1, 7) + f_varint(2, 9) + f_len(3, varint(ADDR) + varint(ADDR + 1))),  # packed
    (85, f_varint(1, ADDR) + f_varint(2, 1)), (86, f_varint(1, ADDR) + f_varint(2, 1)), (88, f_varint(1, ADDR) + f_varint(2, 1)),
    (85, f_varint(1, ADDR) + f_varint(3, (1 << 64) - 5)),  # error -5 as int32: ten bytes
    (70, f_varint(1, ADDR)), (71, f_varint(1, ADDR) + f_len(2, service)), (72, f_varint(1, ADDR)),
    (73, f_varint(1, ADDR) + f_varint(2, 0x12)), (74, f_varint(1, ADDR) + f_varint(2, 0x12) + f_len(3, b"\x64")),
    (75, f_varint(1, ADDR) + f_varint(2, 0x12) + f_varint(3, 1) + f_len(4, b"\x01\x02\x03")),
    (76, f_varint(1, ADDR) + f_varint(2, 0x13)), (77, f_varint(1, ADDR) + f_varint(2, 0x13) + f_len(3, b"\x01\x00")),
    (78, f_varint(1, ADDR) + f_varint(2, 0x12) + f_varint(3, 1)), (79, f_varint(1, ADDR) + f_varint(2, 0x12) + f_len(3, b"\x63")),
    (82, f_varint(1, ADDR) + f_varint(2, 0x12) + f_varint(3, 0x85)), (83, f_varint(1, ADDR) + f_varint(2, 0x12)),
    (84, f_varint(1, ADDR) + f_varint(2, 0x12)),
    (126, f_varint(1, 2) + f_varint(2, 1) + f_varint(3, 1)), (127, f_varint(1, 1)),
    # protobuf's corners: a padded varint, fields out of order and repeated (the last wins),
    # unknown fields of every wire type, an embedded message in two parts (they merge),
    # invalid UTF-8, a wrong wire type, a group, truncation.
    (1, f_varint(3, 10) + bytes([0x10, 0x81, 0x80, 0x80, 0x00]) + f_len(1, "a") + f_len(1, "b")),
    (9, f_varint(100, 1) + f_fixed32(101, 2) + varint(102 << 3 | 1) + bytes(8) + f_len(103, b"xyz")),
    (37, f_len(3, f_len(3, f_varint(1, 2))) + f_len(3, f_len(3, f_varint(2, 3)))),
    (1, f_len(1, b"\xff\xfe\xc3")), (1, f_fixed32(2, 1)), (1, bytes([0x0B, 0x0C])), (1, bytes([0x0A, 0x05, 0x61])),
    (71, f_varint(1, ADDR) + f_len(2, service + f_len(3, b"\x0a"))),
    (200, b"\x08\x01"),  # undeclared
]


def plain_frame(t: int, p: bytes) -> bytes:
    return b"\x00" + varint(len(p)) + varint(t) + p


def noise_plain_frame(t: int, p: bytes) -> bytes:
    body = struct.pack(">HH", t, len(p)) + p
    return b"\x01" + struct.pack(">H", len(body)) + body


def rec(op: int, b: bytes) -> bytes:
    return bytes([op, len(b)]) + b


def api_frames_seeds() -> list[bytes]:
    out = []
    # The plaintext session of PROTOCOL.md 13, one frame per message, the whole table as one
    # stream, frames with padded varints, and the corruptions.
    out.append(b"".join(plain_frame(t, p) for t, p in MESSAGES[:12]))
    out.append(b"".join(plain_frame(t, p) for t, p in MESSAGES))
    for t, p in MESSAGES:
        out.append(plain_frame(t, p))
    out.append(b"\x00\x82\x00\x81\x00" + b"\x10\x01")                  # length 2, type 1, both padded
    out.append(plain_frame(7, b"") + b"\x01\x00\x00")                   # a Noise frame after a plaintext one
    out.append(b"\x00" + varint(32769) + b"\x01")                       # over the limit
    out.append(b"\x00\x00" + varint(65536))                             # type out of range
    out.append(b"\x00" + b"\xff" * 10 + b"\x01")                        # overlong length
    out.append(b"\x00" + b"\x80" * 9 + b"\x01" + b"\x01")               # the 64th bit: over the limit
    # Many small frames past the 4096 bytes at which the decoders compact their buffer.
    out.append(b"".join(plain_frame(93, adverts) for _ in range(80)))
    out.append(b"".join(noise_plain_frame(93, adverts) for _ in range(80)))
    # Noise: the vectors' frames, and frames whose bodies are messages as the transport decrypts them.
    out += [vector("clientHandshake") + vector("clientMessages"), vector("serverHello") + vector("serverHandshake") + vector("serverMessages")]
    out.append(b"".join(noise_plain_frame(t, p) for t, p in MESSAGES))
    out.append(b"\x01\x80\x01")                                         # over the limit
    out.append(b"\x01\x00\x00" + b"\x00")                               # plaintext after Noise
    return out


def api_message_seeds() -> list[bytes]:
    return [struct.pack(">H", t) + p for t, p in MESSAGES]


def api_noise_seeds() -> list[bytes]:
    hs, msgs = vector("clientHandshake"), vector("clientMessages")
    hello, handshake = hs[:3], hs[3:]
    out = [
        b"\x00" + hs + msgs,                         # aioesphomeapi's session: completes, two messages
        b"\x00" + hs,
        b"\x00" + vector("wrongPSKClientHandshake"),  # MAC failure
        b"\x00" + plain_frame(1, vector("clientPayload1")),  # a plaintext client: bad indicator
        b"\x00" + hello + b"\x01\x00\x00",            # empty handshake message
        b"\x00" + hello + b"\x01\x00\x02\x01\x00",    # bad handshake error byte
        b"\x00" + hello + b"\x01\x00\x05\x00abcd",    # too short for a key and a tag
        b"\x00" + hello + b"\x01\x00\x81" + bytes(129),  # over 128 bytes
        b"\x00" + b"\x01\x00\x04abcd" + handshake,    # another hello: the tag fails
        b"\x00" + hs + msgs[:20] + b"\x00" + msgs[21:],  # a flipped ciphertext byte
        b"\x00" + hs + b"\x00",                       # plaintext after the handshake
    ]
    # Sealed: messages encrypted by the harness with the client's cipher.
    sealed = b"\x01"
    for t, p in MESSAGES:
        if len(p) <= 253:
            sealed += rec(1, struct.pack(">H", t) + p)
    out.append(sealed)
    out.append(b"\x01" + rec(1, b"\x00\x01" + vector("clientPayload1")) + rec(1, b"\x00\x42" + vector("clientPayload2")))
    out.append(b"\x01" + rec(0, b"\x00\x07\x00\x00" + b"pad"))                  # padding after the payload
    out.append(b"\x01" + rec(0, b"\x00\x07\x00"))                               # shorter than the header
    out.append(b"\x01" + rec(0, b"\x00\x07\x00\x05abc"))                        # length past the end
    out.append(b"\x01" + rec(1, b"\x00\x07") + rec(2, b"\x01\x00\x10" + bytes(16)) + rec(1, b"\x00\x07"))  # a forged frame
    out.append(b"\x01" + rec(2, b"\x02"))                                       # a bad indicator
    out.append(b"\x01" + rec(2, b"\x01\x80\x01"))                               # over the limit
    return out


if __name__ == "__main__":
    write_corpus("api-frames", api_frames_seeds())
    write_corpus("api-message", api_message_seeds())
    write_corpus("api-noise", api_noise_seeds())
