"""A peer's legacy advertising data: flags, local name and service UUID."""

from __future__ import annotations

import uuid as uuidlib

from bumble.core import AdvertisingData

from attledtools.peers import advstamp
from attledtools.peers.options import PeripheralOptions
from attledtools.peers.profiles import PROFILES

# Legacy advertising data limit (Core Vol 6, Part B, 2.3.1.1).
LEGACY_ADV_DATA_MAX = 31

# The Flags AD's value (Core Supplement, Part A, 1.3): 0x06.
ADV_FLAGS_VALUE = AdvertisingData.LE_GENERAL_DISCOVERABLE_MODE_FLAG | AdvertisingData.BR_EDR_NOT_SUPPORTED_FLAG


def _ad(ad_type: int, data: bytes) -> bytes:
    return bytes([len(data) + 1, ad_type]) + data


def uuid128_le(text: str) -> bytes:
    """A 128-bit UUID in the little-endian byte order used on the air."""
    return uuidlib.UUID(text).bytes[::-1]


def build_advertising_data(opts: PeripheralOptions) -> bytes:
    """Legacy advertising data: [Flags] + local name + 128-bit UUID list
    [+ the stamp AD with stamp=1, last: advstamp.py].

    Flags are included only if everything fits in 31 bytes (flags=auto); with
    "CassarTech" and one 128-bit UUID it is 12 + 18 = 30 bytes, so no Flags.
    """
    body = b""
    if opts.name_in != "none":
        text = opts.name if opts.short_len is None else opts.name[: opts.short_len]
        ad_type = AdvertisingData.COMPLETE_LOCAL_NAME if opts.name_in == "adv" else AdvertisingData.SHORTENED_LOCAL_NAME
        body += _ad(ad_type, text.encode("utf-8"))
    if opts.advertise_uuid and opts.profile in PROFILES:
        uuid = uuid128_le(PROFILES[opts.profile].service_uuid)
        body += _ad(AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS, uuid)
    if opts.stamp:
        body += advstamp.placeholder()
    flags = _ad(AdvertisingData.FLAGS, bytes([ADV_FLAGS_VALUE]))
    if opts.flags == "1" or (opts.flags == "auto" and len(flags) + len(body) <= LEGACY_ADV_DATA_MAX):
        body = flags + body
    if len(body) > LEGACY_ADV_DATA_MAX:
        raise ValueError(
            f"advertising data for {opts.name!r} is {len(body)} bytes, over the legacy "
            f"limit of {LEGACY_ADV_DATA_MAX}; shorten the name (short=N) or drop the UUID"
        )
    return body
