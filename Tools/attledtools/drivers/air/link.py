"""The air of vworld: one Bumble LocalLink for every controller."""

from __future__ import annotations

import asyncio

from bumble import core
from bumble.link import LocalLink


class Air(LocalLink):
    """LocalLink whose LE ACL data carries the connection's own address.

    Stock LocalLink stamps LE ACL data with the sender controller's random
    address, so a link made with own_address_type=public (or before LE Set
    Random Address) carries no data at all.  Here the source is the address
    the sender used in that connection, as on real air.
    """

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
