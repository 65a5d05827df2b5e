"""Rooms: who hears whom on vworld's air, and how loud (--range, --range-default,
--rssi-noise, --seed, and the stdin command ``range``).

The range matrix has one entry per (host controller, device) pair: the RSSI in
dBm at which they hear each other, or None (out of range).  Pairs not set
explicitly have the default (Bumble's fixed -50 dBm unless --range-default
says otherwise: everyone hears everyone, as without rooms).  Two host
controllers, or two devices, always hear each other at -50 dBm.  Noise, when
asked for, is drawn per advertising report from a generator seeded with
--seed, so that a run repeats.  The link (link.py) applies the matrix.
"""

from __future__ import annotations

import random

BUMBLE_RSSI = -50  # what Bumble's controller puts in every advertising report
RSSI_MIN, RSSI_MAX = -127, 20  # an HCI RSSI (Vol 4 Part E 7.7.65.2); 127 means "not available"

ROOMS_HELP = """\
Rooms (Bumble's controllers only): which host controller hears which device.
  --range H:DEVICE=RSSI|none   host controller H (0-based, --host order) and the
                               device NAME of --device NAME:PROFILE hear each
                               other at RSSI dBm (an int, -127..20), or not at
                               all (none); repeatable
  --range-default RSSI|none    every host/device pair not given (default -50:
                               everyone hears everyone, as without rooms)
  --rssi-noise DB              each advertising report's RSSI gets uniform
                               noise in [-DB, +DB] (an int, default 0)
  --seed N                     seeds the noise and the advertising delays of
                               --timed-air (default 1): a run repeats
Two host controllers, or two devices, always hear each other.  Out of range:
the host controller gets no advertising PDU of the device, its CONNECT_IND
does not reach the device (a connection made that way fails after six
connection intervals, reason 0x3E), and an established connection's LL data
and control PDUs are held (not lost: the link layer retransmits); back in
range within the connection's supervision timeout, they are delivered in
order; otherwise both controllers drop the connection, each host gets
Disconnection Complete reason 0x08 (Connection Timeout), and vworld prints
{"event":"supervision_timeout","host":H,"device":NAME,"handle":..}.  Every
--range at start, and every runtime change (stdin "range H DEVICE RSSI|none"),
is printed as {"event":"range","host":H,"device":NAME,"rssi":R|null}.
"""


def parse_rssi(text: str) -> int | None:
    """An RSSI in dBm (an int in RSSI_MIN..RSSI_MAX), or None for "none"."""
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"RSSI {text!r}: expected an int in dBm or none") from None
    if not RSSI_MIN <= value <= RSSI_MAX:
        raise ValueError(f"RSSI {value}: out of {RSSI_MIN}..{RSSI_MAX} dBm")
    return value


def parse_range(text: str) -> tuple[int, str, int | None]:
    """``H:DEVICE=RSSI|none`` -> (H, DEVICE, RSSI or None)."""
    pair, eq, rssi = text.partition("=")
    host, colon, device = pair.partition(":")
    if not eq or not colon or not device:
        raise ValueError(f"--range {text!r}: expected H:DEVICE=RSSI|none")
    try:
        index = int(host)
    except ValueError:
        raise ValueError(f"--range {text!r}: H is a host controller index (0, 1, ...)") from None
    if index < 0:
        raise ValueError(f"--range {text!r}: H is a host controller index (0, 1, ...)")
    return index, device, parse_rssi(rssi)


class Rooms:
    """The range matrix and the RSSI noise (see the module docstring)."""

    def __init__(self, default: int | None = BUMBLE_RSSI, noise: int = 0, seed: int = 1):
        self.default = default
        self.noise = noise
        self.ranges: dict[tuple[int, str], int | None] = {}
        self._noise_rng = random.Random(seed)

    def rssi(self, host: int, device: str) -> int | None:
        """The RSSI at which host controller ``host`` and device ``device`` hear each other (None: not at all)."""
        return self.ranges.get((host, device), self.default)

    def set(self, host: int, device: str, rssi: int | None) -> None:
        self.ranges[(host, device)] = rssi

    def report_rssi(self, rssi: int) -> int:
        """The RSSI of one advertising report heard at ``rssi``: plus the noise, within HCI's range."""
        if self.noise:
            rssi += self._noise_rng.randint(-self.noise, self.noise)
        return max(RSSI_MIN, min(RSSI_MAX, rssi))

    def describe(self) -> dict:
        """For the ready line: the default, the noise and the pairs set explicitly."""
        return {
            "range_default": self.default,
            "rssi_noise": self.noise,
            "ranges": [{"host": h, "device": d, "rssi": r} for (h, d), r in sorted(self.ranges.items())],
        }
