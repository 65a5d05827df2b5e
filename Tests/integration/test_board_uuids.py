"""The three boards' UUIDs are written down three times: attled's LED profiles
(Sources/LEDProfile/LEDProfile.swift), the boards `attled serve` plays
(Sources/AttledServe/Boards.swift) and the vworld peers' profiles
(Tools/attledtools/peers/profiles.py, the one Python copy: the tools and the
tests import it). This reads the UUID string literals of the two Swift files as
text and fails when profiles.py says otherwise. No build, no controller."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from attledtools.peers.profiles import PROFILES, Props

REPO_ROOT = Path(__file__).resolve().parents[2]
LED_PROFILE = REPO_ROOT / "Sources/LEDProfile/LEDProfile.swift"
BOARDS = REPO_ROOT / "Sources/AttledServe/Boards.swift"
BOARD_NAMES = {"pycom", "particle", "harness"}
UUID_LITERAL = r'u\("([0-9A-Fa-f-]{36})"\)'


def canonical(text: str) -> str:
    """A UUID in one spelling (a malformed literal fails here, by name)."""
    return str(uuid.UUID(text))


def led_profiles() -> dict[str, dict]:
    """LEDProfile.swift's built-in profiles: {name: {"service": U, "rgb": [red, green, blue] or None}}."""
    text = LED_PROFILE.read_text()
    found = {}
    # name: "pycom", service: u("..."), shape: .rgb(red: u("..."), ..., blue: u("...")) or .command
    declaration = (r'LEDProfile\(\s*name: "(\w+)", service: ' + UUID_LITERAL
                   + r',\s*shape: (\.command|\.rgb\(.*?blue: u\("[^"]*"\)\))')
    for m in re.finditer(declaration, text, re.S):
        name, service, shape = m.group(1), m.group(2), m.group(3)
        rgb = None
        if shape != ".command":
            roles = re.findall(r"(red|green|blue): " + UUID_LITERAL, shape)
            assert [r for r, _ in roles] == ["red", "green", "blue"], (name, shape)
            rgb = [canonical(u) for _, u in roles]
        found[name] = {"service": canonical(service), "rgb": rgb}
    return found


def boards() -> dict[str, list[dict]]:
    """Boards.swift's ledService: {name: the LED service's JSON ("services" shape)}."""
    text = BOARDS.read_text()
    return {name: json.loads(body) for name, body in re.findall(r'"(\w+)": """\n(.*?)"""', text, re.S)}


def test_the_swift_files_name_the_three_boards():
    assert set(led_profiles()) == BOARD_NAMES
    assert set(boards()) == BOARD_NAMES
    assert set(PROFILES) == BOARD_NAMES


def test_profiles_py_has_ledprofile_swifts_uuids():
    for name, swift in led_profiles().items():
        spec = PROFILES[name]
        assert canonical(spec.service_uuid) == swift["service"], name
        if swift["rgb"] is None:  # the harness: its command characteristic is found by its properties
            assert not spec.is_rgb, name
        else:
            assert spec.is_rgb, name
            assert [canonical(spec.char(role).uuid) for role in ("red", "green", "blue")] == swift["rgb"], name


# Boards.swift's property names (GATTJSON) and Bumble's, as profiles.py declares them.
PROPERTY_NAMES = {"read": Props.READ, "write": Props.WRITE, "write-without-response": Props.WRITE_WITHOUT_RESPONSE,
                  "notify": Props.NOTIFY, "indicate": Props.INDICATE}


def test_profiles_py_has_boards_swifts_services_characteristics_and_properties():
    for name, services in boards().items():
        spec = PROFILES[name]
        assert len(services) == 1, name
        service = services[0]
        assert canonical(service["uuid"]) == canonical(spec.service_uuid), name
        chars = service["characteristics"]
        assert [canonical(c["uuid"]) for c in chars] == [canonical(c.uuid) for c in spec.chars], name
        for c, char_spec in zip(chars, spec.chars):
            props = Props(0)
            for p in c["properties"]:
                props |= PROPERTY_NAMES[p]
            assert props == char_spec.properties, (name, char_spec.role, c["properties"])
