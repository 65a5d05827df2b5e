"""The air of vworld: one Bumble LocalLink for every controller."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from bumble import core
from bumble.link import LocalLink

from attledtools.peers import advstamp


class Air(LocalLink):
    """LocalLink whose LE ACL data carries the connection's own address.

    Stock LocalLink stamps LE ACL data with the sender controller's random
    address, so a link made with own_address_type=public (or before LE Set
    Random Address) carries no data at all.  Here the source is the address
    the sender used in that connection, as on real air.

    Advertising PDUs whose data ends with a stamp AD (device option stamp=1,
    peers/advstamp.py) are stamped here as they go on the air: the device's
    count of advertising events and time.monotonic_ns().
    """

    def __init__(self) -> None:
        super().__init__()
        self.adv_seq: dict[str, int] = {}

    def send_advertising_pdu(self, sender_controller, packet):
        data = getattr(packet, "data", None)
        if data and advstamp.is_stamped_data(data):
            key = str(packet.advertiser_address)
            seq = self.adv_seq[key] = self.adv_seq.get(key, 0) + 1
            packet = dataclasses.replace(packet, data=advstamp.stamp(data, seq, time.monotonic_ns()))
        super().send_advertising_pdu(sender_controller, packet)

    def send_acl_data(self, sender_controller, destination_address, transport, data):
        if transport == core.PhysicalTransport.LE:
            connection = sender_controller.le_connections.get(destination_address)
            if connection is not None:
                destination = self.find_le_controller(destination_address)
                if destination is not None:
                    source = connection.self_address
                    asyncio.get_running_loop().call_soon(
                        lambda: destination.on_link_acl_data(source, transport, data)
                    )
                return
        super().send_acl_data(sender_controller, destination_address, transport, data)
