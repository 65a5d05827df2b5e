"""The air of vworld: one Bumble LocalLink for every controller."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time

from bumble import core, ll
from bumble.link import LocalLink

from attledtools.drivers.air.airlink import AirLink, pair_key
from attledtools.drivers.air.events import emit
from attledtools.drivers.air.rooms import BUMBLE_RSSI, Rooms
from attledtools.peers import advstamp

ADV_DELAY_MAX_S = 0.010  # advDelay: 0-10 ms added to every advertising event (Vol 6 Part B 4.4.2.2.1)


class Air(LocalLink):
    """LocalLink whose LE ACL data carries the connection's own address.

    Stock LocalLink stamps LE ACL data with the sender controller's random
    address, so a link made with own_address_type=public (or before LE Set
    Random Address) carries no data at all.  Here the source is the address
    the sender used in that connection, as on real air.

    Advertising PDUs whose data ends with a stamp AD (device option stamp=1,
    peers/advstamp.py) are stamped here as they go on the air: the device's
    count of advertising events and time.monotonic_ns().

    Rooms (rooms.py): the controllers are named (``add_host`` / ``add_device``)
    and every advertising PDU (CONNECT_IND included) reaches only those in
    range of its sender; a host controller (HostController) gets it with the
    RSSI of the range matrix, to put in its advertising reports.  Every LE
    connection made on this air is an AirLink (airlink.py), which holds its
    PDUs while its ends are out of range and ends it at the supervision
    timeout.  A CONNECT_IND that the peripheral does not take (out of range,
    or dropped by its controller: not advertising connectable any more,
    another central's CONNECT_IND came first, ...) leaves the central, which
    Bumble told of a connection at once, with one that fails after six
    connection intervals with 0x3E, as on real air (rooms or not).  With ``timed`` (--timed-air) the AirLinks carry their PDUs at
    connection events, and the controllers space their advertising events
    (controller.py) by their interval plus ``adv_delay()``.
    """

    def __init__(self, rooms: Rooms | None = None, timed: bool = False, seed: int = 1) -> None:
        super().__init__()
        self.adv_seq: dict[str, int] = {}
        self.rooms = rooms or Rooms()
        self.timed = timed
        self._delay_rng = random.Random(f"adv_delay:{seed}")
        self._roles: dict[object, tuple[str, int | str]] = {}  # controller -> ("host", I) | ("device", NAME)
        self.host_controllers: dict[int, object] = {}
        self.device_controllers: dict[str, object] = {}
        self.links: dict[tuple[str, str], AirLink] = {}

    # -- who is who, who hears whom ---------------------------------------------------
    def add_host(self, controller, index: int) -> None:
        """Name a controller as host controller ``index`` (--range H)."""
        self._roles[controller] = ("host", index)
        self.host_controllers[index] = controller

    def add_device(self, controller, name: str) -> None:
        """Name a controller as the device ``name`` (--range H:NAME)."""
        self._roles[controller] = ("device", name)
        self.device_controllers[name] = controller

    def role_of(self, controller) -> tuple[str, int | str] | None:
        return self._roles.get(controller)

    def hears(self, a, b) -> int | None:
        """The RSSI at which controllers ``a`` and ``b`` hear each other, None out of range.
        Only a host/device pair follows the range matrix; any other pair hears at -50."""
        ra, rb = self._roles.get(a), self._roles.get(b)
        if ra is not None and rb is not None and ra[0] != rb[0]:
            host, device = (ra[1], rb[1]) if ra[0] == "host" else (rb[1], ra[1])
            return self.rooms.rssi(host, device)
        return BUMBLE_RSSI

    def set_range(self, host: int, device: str, rssi: int | None) -> None:
        """Change one pair of the range matrix (stdin ``range``); its connections follow."""
        if host not in self.host_controllers:
            raise ValueError(f"no host controller {host}")
        if device not in self.device_controllers:
            raise ValueError(f"no device {device!r}")
        self.rooms.set(host, device, rssi)
        emit({"event": "range", "host": host, "device": device, "rssi": rssi})
        for link in list(self.links.values()):
            link.range_changed()

    def adv_delay(self) -> float:
        """advDelay of one advertising event (--timed-air), seconds."""
        return self._delay_rng.uniform(0.0, ADV_DELAY_MAX_S)

    # -- advertising --------------------------------------------------------------------
    def send_advertising_pdu(self, sender_controller, packet):
        data = getattr(packet, "data", None)
        if data and advstamp.is_stamped_data(data):
            key = str(packet.advertiser_address)
            seq = self.adv_seq[key] = self.adv_seq.get(key, 0) + 1
            packet = dataclasses.replace(packet, data=advstamp.stamp(data, seq, time.monotonic_ns()))
        link = self._connect_ind(sender_controller, packet) if isinstance(packet, ll.ConnectInd) else None
        loop = asyncio.get_running_loop()
        for c in self.controllers:
            if c is sender_controller:
                continue
            rssi = self.hears(sender_controller, c)
            if rssi is None:
                continue
            if link is not None and c is link.peripheral:
                loop.call_soon(self._deliver_connect_ind, link, packet, rssi)
            else:
                loop.call_soon(self._deliver_advertising_pdu, c, packet, rssi)

    @staticmethod
    def _deliver_advertising_pdu(controller, packet, rssi: int) -> None:
        receive = getattr(controller, "on_air_advertising_pdu", None)
        if receive is not None:
            receive(packet, rssi)
        else:
            controller.on_ll_advertising_pdu(packet)

    def _connect_ind(self, central, packet: ll.ConnectInd) -> AirLink | None:
        """A central sends a CONNECT_IND (its connection is made already): the AirLink of that connection."""
        peripheral = self.find_le_controller(packet.advertiser_address)
        if peripheral is None or peripheral is central:
            return None
        key = pair_key(packet.initiator_address, packet.advertiser_address)
        old = self.links.get(key)
        if old is not None:
            old.close()
        link = self.links[key] = AirLink(self, central, peripheral, packet.initiator_address,
                                         packet.advertiser_address, packet.interval, packet.latency, packet.timeout)
        return link

    def _deliver_connect_ind(self, link: AirLink, packet: ll.ConnectInd, rssi: int) -> None:
        """The CONNECT_IND reaches its peripheral: did it take it?  Bumble's central
        reported its connection made when it sent it; a peripheral that drops it
        (no longer advertising connectable, e.g. another central's CONNECT_IND came
        first, or any other reason) makes no connection of it, and the central's
        then fails as one whose CONNECT_IND did not reach the peripheral (0x3E)."""
        peripheral = link.peripheral
        before = peripheral.le_connections.get(packet.initiator_address)
        self._deliver_advertising_pdu(peripheral, packet, rssi)
        after = peripheral.le_connections.get(packet.initiator_address)
        taken = after is not None and after is not before and after.self_address == packet.advertiser_address
        if not taken:
            link.not_taken()

    # -- connections --------------------------------------------------------------------
    def send_acl_data(self, sender_controller, destination_address, transport, data):
        if transport == core.PhysicalTransport.LE:
            connection = sender_controller.le_connections.get(destination_address)
            if connection is not None:
                destination = self.find_le_controller(destination_address)
                if destination is not None:
                    source = connection.self_address
                    deliver = lambda: destination.on_link_acl_data(source, transport, data)  # noqa: E731
                    link = self.links.get(pair_key(source, destination_address))
                    if link is not None:
                        link.send(source, deliver, len(data))
                    else:
                        asyncio.get_running_loop().call_soon(deliver)
                return
        super().send_acl_data(sender_controller, destination_address, transport, data)

    def send_ll_control_pdu(self, sender_address, receiver_address, packet):
        link = self.links.get(pair_key(sender_address, receiver_address))
        if link is None:
            return super().send_ll_control_pdu(sender_address, receiver_address, packet)
        receiver = self.find_le_controller(receiver_address)
        if receiver is None:
            raise core.InvalidArgumentError(f"Unable to find controller for address {receiver_address}")

        def deliver() -> None:
            if isinstance(packet, ll.ConnectionUpdateInd):
                link.parameters_updated(packet.interval, packet.latency, packet.timeout)
            elif isinstance(packet, ll.ConnectionRateInd):
                link.parameters_updated(packet.interval, packet.peripheral_latency, packet.timeout)
            receiver.on_ll_control_pdu(sender_address, packet)
            if isinstance(packet, ll.TerminateInd):
                link.close()  # both ends have dropped it now

        link.send(sender_address, deliver)
        return None

