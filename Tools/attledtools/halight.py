"""Home Assistant's JSON light, as attled's gateway keeps it: the one light model
of the tools (the gateway soak's expectations, the bench's reference gateway).

It follows Sources/AttledHomeAssistant/HALight.swift and the gateway's use of it
(Sources/AttledGateway/GatewayCommands.swift, GatewayLamps.swift):

- a command payload is ``{"state":"ON"|"OFF", "brightness":0..255,
  "color":{"r","g","b"}, "transition":s, "flash":s}`` (``parse_command``,
  LightCommand.parse): ``state`` is required; an unknown member, a duplicate
  key, a wrong type, a fractional or out-of-range value, a payload over
  1024 bytes or one that is not a JSON object is refused (CommandRefused), and
  the gateway ignores it: nothing is written, nothing published. Nothing is
  clamped;
- the state after a command (``Light.apply``, LightState.applying): ``state``
  sets on or off, a colour or brightness given replaces the stored one; OFF
  keeps them, so a bare ON restores them;
- before anything is known a light is off, white, brightness 255
  (``Light()``, LightState.initial); on connect the gateway reads the colour
  back (``Light.read_back``): black is that initial state, any other colour is
  on at full brightness with that colour;
- the device is written the colour scaled by brightness, rounded to nearest,
  black when off (``Light.device``, deviceColour); the state message is
  ``Light.state`` (stateJSON), retained.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

MAX_PAYLOAD_BYTES = 1024  # LightCommand.maxPayloadBytes
RGB = tuple[int, int, int]


class CommandRefused(ValueError):
    """A command payload attled's gateway refuses (and ignores); the message says why."""


@dataclass(frozen=True)
class LightCommand:
    """A validated Home Assistant light command (LightCommand)."""

    on: bool
    brightness: int | None = None
    color: RGB | None = None
    transition: float | None = None  # accepted and ignored: the devices cannot fade
    flash: int | None = None  # accepted and ignored: the devices cannot flash


class _Members(list):
    """A JSON object as its (key, value) members in order (duplicates refused)."""


def _members(pairs: list) -> _Members:
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise CommandRefused(f"light command: duplicate key {key!r}")
        seen.add(key)
    return _Members(pairs)


def _refuse_constant(name: str):
    raise CommandRefused(f"light command: {name} is not JSON")


def _kind(value) -> str:
    if isinstance(value, _Members):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return repr(value)


def _integer(value) -> int | None:
    """JSONValue.integerValue: an integer, or a number with no fractional part within Int64."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -2**63 <= value < 2**63 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and -2.0**63 <= value < 2.0**63:
        return int(value)
    return None


def _channel(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CommandRefused(f'light command field "{field}" must be an integer 0...255, got {_kind(value)}')
    i = _integer(value)
    if i is None:
        raise CommandRefused(f'light command field "{field}" must be an integer 0...255, got {value!r}')
    if not 0 <= i <= 255:
        raise CommandRefused(f'light command field "{field}" is {i}, allowed 0...255')
    return i


def _color(value) -> RGB:
    if not isinstance(value, _Members):
        raise CommandRefused(f'light command field "color" must be an object {{r,g,b}}, got {_kind(value)}')
    got: dict[str, int] = {}
    for key, v in value:
        if key not in ("r", "g", "b"):
            raise CommandRefused(f'light command has unknown field "color.{key}"')
        got[key] = _channel(v, f"color.{key}")
    for key in ("r", "g", "b"):
        if key not in got:
            raise CommandRefused(f'light command has no "color.{key}"')
    return (got["r"], got["g"], got["b"])


def _command(members: _Members) -> LightCommand:
    on, seen_state = False, False
    fields: dict = {}
    for key, value in members:
        if key == "state":
            if not isinstance(value, str):
                raise CommandRefused(f'light command field "state" must be "ON" or "OFF", got {_kind(value)}')
            if value not in ("ON", "OFF"):
                raise CommandRefused(f'light command field "state" is "{value}", allowed "ON" or "OFF"')
            on, seen_state = value == "ON", True
        elif key == "brightness":
            fields["brightness"] = _channel(value, key)
        elif key == "color":
            fields["color"] = _color(value)
        elif key == "transition":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CommandRefused(f'light command field "transition" must be a number, got {_kind(value)}')
            if not 0 <= value <= 3600:
                raise CommandRefused(f'light command field "transition" is {float(value)}, allowed 0...3600')
            fields["transition"] = float(value)
        elif key == "flash":
            f = _integer(value)
            if f is None:
                raise CommandRefused(f'light command field "flash" must be an integer, got {_kind(value)}')
            if not 0 <= f <= 3600:
                raise CommandRefused(f'light command field "flash" is {f}, allowed 0...3600')
            fields["flash"] = f
        else:
            raise CommandRefused(f'light command has unknown field "{key}"')
    if not seen_state:
        raise CommandRefused('light command has no "state"')
    return LightCommand(on, **fields)


def parse_command(payload: bytes | str) -> LightCommand:
    """The command a payload is, as attled's gateway reads it; raises CommandRefused."""
    raw = payload.encode() if isinstance(payload, str) else bytes(payload)
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise CommandRefused(f"light command of {len(raw)} bytes is larger than {MAX_PAYLOAD_BYTES}")
    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=_members, parse_constant=_refuse_constant)
    except CommandRefused:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise CommandRefused(f"light command: {error}") from None
    if not isinstance(doc, _Members):
        raise CommandRefused(f"light command must be a JSON object, got {_kind(doc)}")
    return _command(doc)


def command_of(cmd: dict) -> LightCommand:
    """The command a decoded JSON object is (e.g. one about to be published);
    raises CommandRefused as ``parse_command`` does."""
    return parse_command(json.dumps(cmd))


@dataclass(frozen=True)
class Light:
    """What a light is, as Home Assistant sees it (LightState); ``Light()`` is
    the state before anything is known."""

    on: bool = False
    color: RGB = (255, 255, 255)  # as chosen in Home Assistant, before brightness
    brightness: int = 255

    @classmethod
    def read_back(cls, rgb: RGB) -> Light:
        """The state matching the colour read from the device on connect."""
        rgb = tuple(rgb)
        return cls() if rgb == (0, 0, 0) else cls(True, rgb, 255)

    def apply(self, cmd: LightCommand | dict) -> Light:
        """The state after ``cmd`` (a LightCommand, or a JSON object checked as
        the gateway checks it: CommandRefused if it would ignore it)."""
        c = cmd if isinstance(cmd, LightCommand) else command_of(cmd)
        return Light(c.on, self.color if c.color is None else c.color,
                     self.brightness if c.brightness is None else c.brightness)

    @property
    def device(self) -> list[int]:
        """The colour written to the device: scaled by brightness (rounded to nearest), black when off."""
        if not self.on:
            return [0, 0, 0]
        return [(ch * self.brightness + 127) // 255 for ch in self.color]

    @property
    def state(self) -> dict:
        """The state message's JSON (colour and brightness sent when off too)."""
        r, g, b = self.color
        return {"state": "ON" if self.on else "OFF", "color_mode": "rgb", "brightness": self.brightness,
                "color": {"r": r, "g": g, "b": b}}

    def state_json(self) -> str:
        """The state message as attled publishes it (compact, members in this order)."""
        return json.dumps(self.state, separators=(",", ":"))
