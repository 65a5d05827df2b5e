"""The tools' light model (attledtools.halight) against attled's gateway: the
same command checks, states and device colours as Sources/AttledHomeAssistant/HALight.swift
(its unit tests, Tests/BLEStackTests/HomeAssistantTests.swift, give the
vectors) and test_gateway.py observe. No controller, no broker."""

from __future__ import annotations

import pytest

from attledtools.halight import MAX_PAYLOAD_BYTES, CommandRefused, Light, LightCommand, parse_command


def test_the_commands_home_assistant_sends_parse():
    full = parse_command('{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50}}')
    assert full == LightCommand(True, brightness=128, color=(200, 100, 50))
    assert parse_command('{"state":"OFF"}') == LightCommand(False)
    assert parse_command('{"state":"ON"}') == LightCommand(True)
    assert parse_command('{"state":"ON","brightness":1}') == LightCommand(True, brightness=1)
    assert parse_command('{"color":{"b":3,"g":2,"r":1},"state":"ON"}') == LightCommand(True, color=(1, 2, 3))
    assert parse_command('{"state":"OFF","transition":2.5}') == LightCommand(False, transition=2.5)
    assert parse_command('{"state":"ON","flash":2}') == LightCommand(True, flash=2)
    assert parse_command(b' {"state":"ON","brightness":255.0} ').brightness == 255  # integral, with .0


@pytest.mark.parametrize("payload", [
    "", "ON", '{"state":"ON"', '["ON"]', '"ON"', "{}", '{"brightness":10}', '{"state":"on"}', '{"state":true}',
    '{"state":"ON","brightness":256}', '{"state":"ON","brightness":-1}', '{"state":"ON","brightness":12.5}',
    '{"state":"ON","brightness":"128"}', '{"state":"ON","brightness":1e300}', '{"state":"ON","brightness":NaN}',
    '{"state":"ON","brightness":true}', '{"state":"ON","color":[1,2,3]}', '{"state":"ON","color":{"r":1,"g":2}}',
    '{"state":"ON","color":{"r":1,"g":2,"b":3,"w":4}}', '{"state":"ON","color":{"r":300,"g":2,"b":3}}',
    '{"state":"ON","color":{"r":1,"g":null,"b":3}}', '{"state":"ON","effect":"rainbow"}',
    '{"state":"ON","State":"OFF"}', '{"state":"ON","state":"OFF"}', '{"state":"ON","transition":-1}',
    '{"state":"ON","flash":"short"}', '{"state":"ON","color":{"r":{"r":{"r":{"r":1}}}}}',
    # test_gateway.py's test_invalid_commands_are_ignored_and_logged
    "{not json", '{"state":"ON","bogus":1}', '{"state":"ON","color":{"r":256,"g":0,"b":0}}',
    '{"state":"ON","brightness":1.5}', '{"state":"BLINK"}',
])
def test_what_attled_refuses_is_refused_not_clamped(payload):
    with pytest.raises(CommandRefused):
        parse_command(payload)


def test_a_payload_over_1_kib_hostile_bytes_and_every_prefix_are_refused():
    big = '{"state":"ON","transition":0' + " " * 1100 + "}"
    assert len(big) > MAX_PAYLOAD_BYTES
    with pytest.raises(CommandRefused, match="larger than 1024"):
        parse_command(big)
    full = b'{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50},"transition":1}'
    assert parse_command(full).on is True
    for n in range(len(full)):
        with pytest.raises(CommandRefused):
            parse_command(full[:n])
    for hostile in (b"\xff\xfe\x00", b"[" * 1000):
        with pytest.raises(CommandRefused):
            parse_command(hostile)


def test_a_light_starts_off_white_at_full_brightness_and_read_back_black_is_that():
    assert Light() == Light(False, (255, 255, 255), 255)
    assert Light().device == [0, 0, 0]
    assert Light.read_back((0, 0, 0)) == Light()
    # test_gateway: a lamp read back as init=10,20,30 is on, full brightness, that colour.
    assert Light.read_back((10, 20, 30)).state == {"state": "ON", "color_mode": "rgb", "brightness": 255,
                                                  "color": {"r": 10, "g": 20, "b": 30}}


def test_the_reducer_off_keeps_colour_and_brightness_and_a_bare_on_restores_them():
    s = Light().apply({"state": "ON", "brightness": 128, "color": {"r": 200, "g": 100, "b": 50}})
    assert s.device == [100, 50, 25]
    assert s.state_json() == '{"state":"ON","color_mode":"rgb","brightness":128,"color":{"r":200,"g":100,"b":50}}'
    s = s.apply({"state": "OFF"})
    assert s.device == [0, 0, 0]
    assert s.state_json() == '{"state":"OFF","color_mode":"rgb","brightness":128,"color":{"r":200,"g":100,"b":50}}'
    s = s.apply(parse_command('{"state":"ON"}'))
    assert s.device == [100, 50, 25] and s.brightness == 128
    s = s.apply({"state": "ON", "brightness": 255})
    assert s.device == [200, 100, 50]
    with pytest.raises(CommandRefused):
        s.apply({"state": "ON", "brightness": 300})  # the gateway ignores it; nothing to apply


def test_scaling_rounds_to_nearest_for_every_channel_and_brightness():
    for c in range(256):
        for b in range(256):
            assert Light(True, (c, 0, 0), b).device[0] == round(c * b / 255), (c, b)


def test_the_soak_and_the_reference_gateway_use_this_model():
    from attledtools.bench import gateway_reference
    from attledtools.halight import Light as model
    from attledtools.soak import gatewaysoak

    assert gatewaysoak.Light is model
    assert gateway_reference.Light is model
