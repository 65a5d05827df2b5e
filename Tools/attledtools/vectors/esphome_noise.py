"""Test vectors for the ESPHome API's Noise handshake (Sources/ESPHomeAPI,
Tests/BLEStackTests/ESPHomeAPINoiseTests.swift), from independent code:
the client is aioesphomeapi's own frame helper (APINoiseFrameHelper), the
responder noiseprotocol's NoiseConnection, both with fixed keys.

Needs a venv of its own (not the project's .venv; the Swift tests do not
need Python at all):

    python3 -m venv /tmp/noisevenv
    /tmp/noisevenv/bin/pip install noiseprotocol==0.3.1 aioesphomeapi==29.9.0
    /tmp/noisevenv/bin/python Tools/attledtools/vectors/esphome_noise.py

It prints the Swift constants the test holds (paste them over the old ones).
Every value is checked here first: the client completes the handshake on the
responder's frames, each side decrypts the other's two messages, and a
client with the wrong key gets the responder's MAC failure.
"""
import asyncio
import base64
import importlib.abc
import importlib.util
import os
import sys
import warnings


class _SourcesOnly(importlib.abc.MetaPathFinder):
    """Imports aioesphomeapi from its .py files, not its Cython builds: the
    compiled frame helper only takes a real APIConnection, the Python one
    takes the stand-in below. The code is the same."""

    def find_spec(self, name, path, target=None):
        if name != "aioesphomeapi" and not name.startswith("aioesphomeapi."):
            return None
        for entry in path or sys.path:
            base = os.path.join(entry, name.rpartition(".")[2])
            if os.path.isfile(base + ".py"):
                return importlib.util.spec_from_file_location(name, base + ".py")
            if os.path.isfile(os.path.join(base, "__init__.py")):
                return importlib.util.spec_from_file_location(
                    name, os.path.join(base, "__init__.py"), submodule_search_locations=[base])
        return None


sys.meta_path.insert(0, _SourcesOnly())

from cryptography.exceptions import InvalidTag  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import x25519  # noqa: E402
from noise.backends.default.diffie_hellmans import ED25519  # noqa: E402
from noise.backends.default.keypairs import KeyPair25519  # noqa: E402
from noise.connection import Keypair, NoiseConnection  # noqa: E402

PSK = bytes(range(32))
WRONG_PSK = bytes(range(1, 33))
CLIENT_EPHEMERAL = bytes.fromhex("a8abababababababababababababababababababababababababababababab6b")
SERVER_EPHEMERAL = bytes.fromhex("4800000000000000000000000000000000000000000000000000000000000050")
NAME = "attled-proxy"
MAC = "a4c138f00d01"


def keypair(private: bytes) -> KeyPair25519:
    key = x25519.X25519PrivateKey.from_private_bytes(private)
    public = key.public_key()
    return KeyPair25519(key, public, public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


# The client's ephemeral key: noiseprotocol makes it with generate_keypair when
# aioesphomeapi writes its first handshake message.
ED25519.generate_keypair = lambda self: keypair(CLIENT_EPHEMERAL)

from aioesphomeapi import api_pb2  # noqa: E402
from aioesphomeapi._frame_helper.noise import APINoiseFrameHelper  # noqa: E402
from aioesphomeapi.core import InvalidEncryptionKeyAPIError  # noqa: E402


class Connection:
    """Stands in for aioesphomeapi's APIConnection: records what the helper delivers."""

    def __init__(self):
        self.packets = []
        self.errors = []

    def process_packet(self, msg_type, data):
        self.packets.append((msg_type, bytes(data)))

    def report_fatal_error(self, exc):
        self.errors.append(exc)


class Transport:
    """Stands in for the TCP transport: records what the helper writes."""

    def __init__(self):
        self.written = b""
        self.closed = False

    def writelines(self, chunks):
        self.written += b"".join(bytes(c) for c in chunks)

    def close(self):
        self.closed = True


def client(psk: bytes):
    connection, transport = Connection(), Transport()
    helper = APINoiseFrameHelper(connection, base64.b64encode(psk).decode(), NAME, "vectors", "vectors")
    helper.connection_made(transport)
    return helper, connection, transport


def frames(data: bytes):
    """Splits Noise frames: (indicator 0x01, u16 length, body) ..."""
    out = []
    while data:
        assert data[0] == 0x01, data.hex()
        n = data[1] << 8 | data[2]
        out.append(data[3:3 + n])
        data = data[3 + n:]
    return out


def frame(body: bytes) -> bytes:
    return bytes((0x01, len(body) >> 8, len(body) & 0xFF)) + body


def responder(client_hello: bytes) -> NoiseConnection:
    proto = NoiseConnection.from_name(b"Noise_NNpsk0_25519_ChaChaPoly_SHA256")
    proto.set_as_responder()
    proto.set_psks(PSK)
    proto.set_prologue(b"NoiseAPIInit" + len(client_hello).to_bytes(2, "big") + client_hello)
    proto.set_keypair_from_private_bytes(Keypair.EPHEMERAL, SERVER_EPHEMERAL)
    proto.start_handshake()
    return proto


def data_frame(proto: NoiseConnection, msg_type: int, payload: bytes) -> bytes:
    return frame(proto.encrypt(msg_type.to_bytes(2, "big") + len(payload).to_bytes(2, "big") + payload))


def main() -> None:
    # The fixed ephemeral keys are the point here.
    warnings.filterwarnings("ignore", message="One of ephemeral keypairs is already set")
    asyncio.set_event_loop(asyncio.new_event_loop())
    helper, connection, transport = client(PSK)
    client_handshake = transport.written
    hello, handshake = frames(client_handshake)
    assert handshake[0] == 0x00

    proto = responder(hello)
    proto.read_message(handshake[1:])
    server_hello = frame(b"\x01" + NAME.encode() + b"\x00" + MAC.encode() + b"\x00")
    server_handshake = frame(b"\x00" + proto.write_message(b""))
    helper.data_received(server_hello + server_handshake)
    assert helper.ready_future.done() and helper.ready_future.exception() is None, connection.errors
    assert proto.handshake_finished

    # Two messages each way, their payloads by Google's protobuf.
    to_server = [
        (1, api_pb2.HelloRequest(client_info="aioesphomeapi", api_version_major=1, api_version_minor=10).SerializeToString()),
        (66, api_pb2.SubscribeBluetoothLEAdvertisementsRequest(flags=1).SerializeToString()),
    ]
    transport.written = b""
    helper.write_packets(to_server, False)
    client_messages = transport.written
    for body, (msg_type, payload) in zip(frames(client_messages), to_server):
        plain = proto.decrypt(body)
        assert plain == msg_type.to_bytes(2, "big") + len(payload).to_bytes(2, "big") + payload

    advertisement = api_pb2.BluetoothLERawAdvertisement(
        address=0xA4C138F00D02, rssi=-60, address_type=0, data=bytes.fromhex("020106 0509 61747431"))
    to_client = [
        (2, api_pb2.HelloResponse(api_version_major=1, api_version_minor=10, server_info="attled", name=NAME).SerializeToString()),
        (93, api_pb2.BluetoothLERawAdvertisementsResponse(advertisements=[advertisement]).SerializeToString()),
    ]
    server_messages = b"".join(data_frame(proto, t, p) for t, p in to_client)
    helper.data_received(server_messages)
    assert connection.packets == to_client, connection.packets
    assert not connection.errors, connection.errors

    # The wrong key: the responder's MAC check fails; the client reads
    # ESPHome's reject frame as an invalid key.
    bad, bad_connection, bad_transport = client(WRONG_PSK)
    bad_handshake = bad_transport.written
    bad_hello, bad_message = frames(bad_handshake)
    try:
        responder(bad_hello).read_message(bad_message[1:])
        raise AssertionError("the wrong key passed")
    except InvalidTag:
        pass
    bad.data_received(server_hello + frame(b"\x01Handshake MAC failure"))
    assert isinstance(bad_connection.errors[0], InvalidEncryptionKeyAPIError), bad_connection.errors
    assert isinstance(bad.ready_future.exception(), InvalidEncryptionKeyAPIError)

    def swift(name, value, comment):
        print(f"    /// {comment}")
        print(f'    static let {name} = hex("{value.hex()}")')

    print("// Generated by Tools/attledtools/vectors/esphome_noise.py (aioesphomeapi 29.9.0, noiseprotocol 0.3.1).")
    print("enum NoiseVector {")
    print(f'    static let psk = "{base64.b64encode(PSK).decode()}"')
    print(f'    static let wrongPSK = "{base64.b64encode(WRONG_PSK).decode()}"')
    print(f'    static let name = "{NAME}"')
    swift("mac", bytes.fromhex(MAC), "The node's MAC, sent as 12 lowercase hex digits.")
    swift("clientEphemeralPrivateKey", CLIENT_EPHEMERAL, "aioesphomeapi's ephemeral X25519 key.")
    swift("serverEphemeralPrivateKey", SERVER_EPHEMERAL, "The responder's ephemeral X25519 key.")
    swift("clientHandshake", client_handshake, "What aioesphomeapi writes on connecting: the client hello frame and the handshake frame.")
    swift("serverHello", server_hello, "The server hello frame: 01, name, 00, MAC, 00.")
    swift("serverHandshake", server_handshake, "The responder's handshake frame: 00, e, the tag of the empty payload.")
    swift("handshakeHash", proto.get_handshake_hash(), "The handshake hash h at the end.")
    swift("clientMessages", client_messages, "HelloRequest (1) and SubscribeBluetoothLEAdvertisementsRequest (66), encrypted by aioesphomeapi.")
    for i, (t, p) in enumerate(to_server):
        swift(f"clientPayload{i + 1}", p, f"The payload of client message {i + 1} (type {t}), by Google's protobuf.")
    swift("serverMessages", server_messages, "HelloResponse (2) and BluetoothLERawAdvertisementsResponse (93), encrypted by the responder.")
    for i, (t, p) in enumerate(to_client):
        swift(f"serverPayload{i + 1}", p, f"The payload of server message {i + 1} (type {t}), by Google's protobuf.")
    swift("wrongPSKClientHandshake", bad_handshake, "What aioesphomeapi writes with the wrong key.")
    print("}")


if __name__ == "__main__":
    main()
