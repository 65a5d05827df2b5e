"""Writes Tests/BLEStackTests/Golden/synthetic.btsnoop: one capture holding every
AD type and every ATT opcode attled knows, plus L2CAP signalling and SMP, for
the golden decode test. (The real-run golden capture comes from an attled run:
see Tests/BLEStackTests/Golden/README.md.)"""

import struct
import sys
from pathlib import Path

from bumble.core import AdvertisingData

T = AdvertisingData.Type  # AD types (Core Supplement, Part A, 1), Bumble's

EPOCH = 0x00DCDDB30F2F8000
T0 = 1_764_000_000_000_000  # a fixed wall clock, microseconds since 1970

records = []


def rec(h4: bytes, received: bool, dt_us: int):
    flags = (1 if received else 0) | (2 if h4[0] in (1, 4) else 0)
    records.append(struct.pack(">IIIIQ", len(h4), len(h4), flags, 0, T0 + EPOCH + dt_us) + h4)


def ad(t: int, data: bytes) -> bytes:
    return bytes([len(data) + 1, t]) + data


def le_adv_report(addr: bytes, data: bytes, evt=0x00) -> bytes:
    body = bytes([0x02, 1, evt, 0x01]) + addr + bytes([len(data)]) + data + bytes([0xC4])
    return bytes([0x04, 0x3E, len(body)]) + body


def acl(handle: int, cid: int, payload: bytes, first=True) -> bytes:
    l2 = struct.pack("<HH", len(payload), cid) + payload
    hf = handle | ((0x0 if first else 0x1) << 12)
    return bytes([0x02]) + struct.pack("<HH", hf, len(l2)) + l2


addr = bytes.fromhex("554433221 1c0".replace(" ", ""))
u128 = bytes(range(16))
# Every AD type, spread over legacy reports (31 bytes each at most).
ads = [
    ad(T.FLAGS, b"\x06")
    + ad(T.INCOMPLETE_LIST_OF_16_BIT_SERVICE_CLASS_UUIDS, b"\x0d\x18")
    + ad(T.COMPLETE_LIST_OF_16_BIT_SERVICE_CLASS_UUIDS, b"\x0f\x18\x0a\x18")
    + ad(T.INCOMPLETE_LIST_OF_32_BIT_SERVICE_CLASS_UUIDS, b"\x01\x02\x03\x04"),
    ad(T.COMPLETE_LIST_OF_32_BIT_SERVICE_CLASS_UUIDS, b"\x05\x06\x07\x08")
    + ad(T.INCOMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS, u128),
    ad(T.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS, u128)
    + ad(T.SHORTENED_LOCAL_NAME, b"Cass"),
    ad(T.COMPLETE_LOCAL_NAME, b"CassarTech")
    + ad(T.TX_POWER_LEVEL, b"\xfc")
    + ad(T.CLASS_OF_DEVICE, b"\x0c\x02\x5a")
    + ad(T.PERIPHERAL_CONNECTION_INTERVAL_RANGE, b"\x06\x00\x80\x0c"),
    ad(T.LIST_OF_16_BIT_SERVICE_SOLICITATION_UUIDS, b"\x0d\x18")
    + ad(T.LIST_OF_128_BIT_SERVICE_SOLICITATION_UUIDS, u128),
    ad(T.SERVICE_DATA_16_BIT_UUID, b"\x0f\x18\x64")
    + ad(T.PUBLIC_TARGET_ADDRESS, bytes.fromhex("112233445566"))
    + ad(T.RANDOM_TARGET_ADDRESS, bytes.fromhex("aabbccddeeff")),
    ad(T.APPEARANCE, b"\xc1\x03")
    + ad(T.ADVERTISING_INTERVAL, b"\xa0\x00")
    + ad(T.LE_BLUETOOTH_DEVICE_ADDRESS, bytes.fromhex("11223344556601"))
    + ad(T.LE_ROLE, b"\x00"),
    ad(T.LIST_OF_32_BIT_SERVICE_SOLICITATION_UUIDS, b"\x01\x02\x03\x04")
    + ad(T.SERVICE_DATA_32_BIT_UUID, b"\x01\x02\x03\x04\x99")
    + ad(T.URI, b"\x17//example.com"),
    ad(T.SERVICE_DATA_128_BIT_UUID, u128 + b"\x42")
    + ad(T.MANUFACTURER_SPECIFIC_DATA, b"\x4c\x00\x02\x15"),
    ad(T.DEVICE_ID, b"\x02\x00\x5f\x00\x01\x00")
    + ad(T.MESH_MESSAGE, b"\x00\x01")
    + ad(T.MESH_BEACON, b"\x00")
    + ad(T.BIGINFO, b"\x01")
    + ad(T.BROADCAST_CODE, b"\x02")
    + ad(T.BROADCAST_NAME, b"Bcast"),
    # malformed: a length running past the end
    ad(T.COMPLETE_LOCAL_NAME, b"ok")
    + bytes([0x09, 0xFF, 0x01]),
]
t = 0
for i, data in enumerate(ads):
    t += 1000
    rec(le_adv_report(addr, data, evt=[0, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0][i]), True, t)

H = 0x0040
att = [
    # (received?, PDU)
    (False, "02 05 02"), (True, "03 f7 00"),                               # Exchange MTU
    (False, "06 01 00 ff ff 00 28 0f 18"), (True, "07 0e 00 14 00"),       # Find By Type Value
    (False, "10 01 00 ff ff 00 28"), (True, "11 06 01 00 05 00 00 18 06 00 0d 00 01 18"),  # Read By Group Type
    (False, "08 0e 00 14 00 03 28"), (True, "09 07 0f 00 0a 10 00 19 2a"), # Read By Type
    (False, "04 11 00 14 00"), (True, "05 01 11 00 02 29"),                # Find Information
    (False, "0a 10 00"), (True, "0b 64"),                                  # Read
    (False, "0c 10 00 16 00"), (True, "0d 41 42 43"),                      # Read Blob
    (False, "0e 10 00 12 00"), (True, "0f 64 65"),                         # Read Multiple
    (False, "20 10 00 12 00"), (True, "21 01 00 64 01 00 65"),             # Read Multiple Variable
    (False, "12 10 00 ff"), (True, "13"),                                  # Write
    (False, "52 12 00 00"),                                                # Write Command
    (False, "d2 12 00 01 " + "aa " * 12),                                  # Signed Write Command
    (False, "16 10 00 00 00 68 69"), (True, "17 10 00 00 00 68 69"),       # Prepare Write
    (False, "18 01"), (True, "19"),                                        # Execute Write
    (True, "1b 10 00 01"),                                                 # Notification
    (True, "1d 10 00 02"), (False, "1e"),                                  # Indication, Confirmation
    (True, "23 10 00 01 00 01 12 00 01 00 02"),                            # Multiple Handle Value Notification
    (False, "0a 99 00"), (True, "01 0a 99 00 01"),                         # Error Response
    (True, "0a 05 00"), (False, "01 0a 05 00 06"),                         # peer request answered
    (True, "7f 00"),                                                       # unknown opcode
]
for received, hexs in att:
    t += 1000
    rec(acl(H, 4, bytes.fromhex(hexs)), received, t)
# L2CAP signalling and SMP
for received, cid, hexs in [
    (True, 5, "12 01 08 00 18 00 28 00 00 00 90 01"), (False, 5, "13 01 02 00 00 00"),
    (True, 5, "14 02 0a 00 80 00 40 00 40 00 40 00 05 00"), (False, 5, "01 02 02 00 00 00"),
    (True, 6, "0b 0d"), (False, 6, "05 05"),
    (True, 6, "01 03 00 01 10 07 07"),
]:
    t += 1000
    rec(acl(H, cid, bytes.fromhex(hexs)), received, t)
# A fragmented Write Request: start then continuation
t += 1000
payload = bytes.fromhex("12 10 00") + bytes(range(30))
l2 = struct.pack("<HH", len(payload), 4) + payload
rec(bytes([0x02]) + struct.pack("<HH", H, 20) + l2[:20], False, t)
t += 1000
rec(bytes([0x02]) + struct.pack("<HH", H | 0x1000, len(l2) - 20) + l2[20:], False, t)

# GATT procedures beyond discovery, appended so the records above keep their numbers:
# Find Included Services (an include with a 16-bit UUID, then one of a 128-bit
# service, which carries none, and the Read of that service's declaration),
# Read Using Characteristic UUID (a 5-byte value that is not a declaration),
# Read By Type with a 128-bit type, a long read and a cancelled long write.
for received, hexs in [
    (False, "08 01 00 ff ff 02 28"), (True, "09 08 02 00 10 00 15 00 0f 18"),   # include, 16-bit UUID
    (False, "08 03 00 ff ff 02 28"), (True, "09 06 03 00 20 00 25 00"),         # include, 128-bit service
    (False, "0a 20 00"), (True, "0b " + " ".join(f"{b:02x}" for b in u128)),     # its service declaration
    (False, "08 04 00 ff ff 02 28"), (True, "01 08 04 00 0a"),                   # no more includes
    (False, "08 01 00 ff ff 00 2a"), (True, "09 07 03 00 41 74 74 6c 65"),       # Read Using Characteristic UUID
    (False, "08 01 00 ff ff " + " ".join(f"{b:02x}" for b in u128)), (True, "01 08 01 00 0a"),
    (False, "0c 10 00 16 00"), (True, "01 0c 10 00 0b"),                         # Read Blob: Attribute Not Long
    (False, "16 10 00 16 00 6a 6b"), (True, "17 10 00 16 00 6a 6b"),             # Prepare Write at offset 22
    (False, "18 00"), (True, "19"),                                              # Execute Write: cancel
    (True, "09 07 05 00 02 06 00 00 2a"),                                        # a declaration answering no request seen
]:
    t += 1000
    rec(acl(H, 4, bytes.fromhex(hexs)), received, t)
# L2CAP reassembly faults: a start cut short by another start, then a PDU
# longer than its basic header says (the stack drops both).
t += 1000
rec(bytes([0x02]) + struct.pack("<HH", H | 0x2000, 6) + bytes.fromhex("05 00 04 00 0b 01"), True, t)
t += 1000
rec(bytes([0x02]) + struct.pack("<HH", H | 0x2000, 6) + bytes.fromhex("02 00 04 00 0b 02"), True, t)
t += 1000
rec(bytes([0x02]) + struct.pack("<HH", H | 0x2000, 7) + bytes.fromhex("01 00 04 00 0b 03 04"), True, t)

out = Path(sys.argv[1] if len(sys.argv) > 1 else "Tests/BLEStackTests/Golden/synthetic.btsnoop")
out.write_bytes(b"btsnoop\0" + struct.pack(">II", 1, 1002) + b"".join(records))
print(f"wrote {out}: {len(records)} records")
