"""The GATT profiles of the LED peers: which characteristics, UUIDs and properties.

``pycom``, ``particle`` and ``harness`` mimic the fixed firmware attled must
drive (see the package's doc); OTHER_PROFILES are built by other modules of
this package on the same options and LedPeripheral machinery.

PROFILES is the one Python copy of the boards' UUIDs: the tools and the tests
import it. attled's own copies are Sources/LEDProfile/LEDProfile.swift and
Sources/AttledServe/Boards.swift; Tests/integration/test_board_uuids.py reads
their UUID literals and fails when these differ.
"""

from __future__ import annotations

import dataclasses
import importlib

from bumble.gatt import Characteristic

Props = Characteristic.Properties


@dataclasses.dataclass(frozen=True)
class CharSpec:
    """One characteristic of a profile: its role name, UUID and properties."""

    role: str  # "red" | "green" | "blue" | "command" | "button"
    uuid: str
    properties: Props


@dataclasses.dataclass(frozen=True)
class ProfileSpec:
    name: str
    service_uuid: str
    chars: tuple[CharSpec, ...]

    @property
    def is_rgb(self) -> bool:
        return self.name in ("pycom", "particle")

    def char(self, role: str) -> CharSpec:
        """The characteristic playing ``role`` ("red", "command", "button" ...)."""
        return next(c for c in self.chars if c.role == role)


PROFILES: dict[str, ProfileSpec] = {
    "pycom": ProfileSpec(
        "pycom",
        "36353433-3231-3039-3837-363534333231",
        (
            CharSpec("red", "36353433-3231-3039-3837-363534336261", Props.READ | Props.WRITE),
            CharSpec("green", "36353433-3231-3039-3837-363534336262", Props.READ | Props.WRITE),
            CharSpec("blue", "36353433-3231-3039-3837-363534336263", Props.READ | Props.WRITE),
        ),
    ),
    "particle": ProfileSpec(
        "particle",
        "b4250400-fb4b-4746-b2b0-93f0e61122c6",
        (
            CharSpec(
                "red",
                "b4250401-fb4b-4746-b2b0-93f0e61122c6",
                Props.READ | Props.WRITE_WITHOUT_RESPONSE,
            ),
            CharSpec(
                "green",
                "b4250402-fb4b-4746-b2b0-93f0e61122c6",
                Props.READ | Props.WRITE_WITHOUT_RESPONSE,
            ),
            CharSpec(
                "blue",
                "b4250403-fb4b-4746-b2b0-93f0e61122c6",
                Props.READ | Props.WRITE_WITHOUT_RESPONSE,
            ),
        ),
    ),
    "harness": ProfileSpec(
        "harness",
        "19B10010-E8F2-537E-4F6C-D104768A1214",
        (
            CharSpec("command", "19B10011-E8F2-537E-4F6C-D104768A1214", Props.READ | Props.WRITE),
            CharSpec("button", "19B10012-E8F2-537E-4F6C-D104768A1214", Props.READ | Props.NOTIFY),
        ),
    ),
}

# Profiles built by other modules on the same options and LedPeripheral
# machinery: profile name -> module (of this package).  The module provides
# OPTION_KEYS (its extra device keys), check_options(opts) (raises
# ValueError) and PERIPHERAL (a LedPeripheral subclass).
OTHER_PROFILES = {"gattdb": "attledtools.peers.gattdb"}


def other_profile(name: str):
    """The module serving a profile of OTHER_PROFILES (imported on first use)."""
    return importlib.import_module(OTHER_PROFILES[name])


# Harness commands: byte -> (button index, pressed)
HARNESS_COMMANDS = {1: (0, 1), 0: (0, 0), 3: (1, 1), 4: (1, 0)}
