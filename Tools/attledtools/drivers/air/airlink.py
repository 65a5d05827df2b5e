"""One LE connection as vworld's air carries it (AirLink): its LL PDUs (ACL
data and LL control) held while its two controllers are out of range, its
supervision timeout, and with --timed-air its connection events.

Bumble's controllers keep no connection parameters on their Connection
objects (the central reads them from its LE Create Connection, the peripheral
reports fixed ones), so the air takes them from the CONNECT_IND and from every
LL_CONNECTION_UPDATE_IND (or LL_CONNECTION_RATE_IND) it carries.

Range (rooms.py): while the two controllers are out of range, nothing is
delivered either way; the PDUs wait in order (the link layer retransmits on
real air).  Back in range before the supervision timeout, they are delivered
in order and the link goes on; otherwise both controllers drop the connection
with reason 0x08 (Connection Timeout) and vworld prints a
"supervision_timeout" event.  A CONNECT_IND that did not reach the peripheral
leaves the central alone with its connection: it fails after six connection
intervals with reason 0x3E (Connection Failed to be Established,
Vol 6 Part B 4.5.2), "connection_failed" event.  So does a CONNECT_IND that
reached the peripheral but that its controller did not take (link.py tells,
``not_taken``): Bumble's central reports its connection made as it sends the
CONNECT_IND, and Bumble's peripheral ignores one that comes when it no longer
advertises connectable (another central's CONNECT_IND got there first, or it
is connected already).  Such a connection carries nothing: the central's PDUs
go nowhere (nothing answers), and its end is 0x3E, not the host's own ATT
timeout; a central whose host disconnects it first just lets it go, no event.

Timed air: the connection's events are at its anchor (the CONNECT_IND's time)
plus multiples of its interval; a PDU goes at the first event after it was
queued (so an answer goes one event after the request at the earliest: the
request's event is over by the time the host answers), at most
PDUS_PER_EVENT LL PDUs each way per event (an L2CAP PDU longer than
LL_PAYLOAD bytes is several LL PDUs, delivered with its last one).  A
connection update takes effect at its instant, INSTANT_EVENTS events after
the event that carried it (Bumble's LL_CONNECTION_UPDATE_IND has no instant).
Left out: peripheral latency (the peripheral listens at every event), the
LE Connection Update Complete events (Bumble sends them at once, not at the
instant), and the Number Of Completed Packets events (Bumble sends them when
the host's packet arrives, not when the peer acknowledged it).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from bumble import hci

from attledtools.drivers.air.events import emit

if TYPE_CHECKING:
    from attledtools.drivers.air.link import Air

LL_PAYLOAD = 27  # octets per LL data PDU: Bumble's controllers offer no Data Length Extension
PDUS_PER_EVENT = 4  # LL PDUs each way per connection event, under --timed-air
INSTANT_EVENTS = 6  # a connection update takes effect this many events after it was carried
ESTABLISH_EVENTS = 6  # a CONNECT_IND unanswered for this many intervals: the connection failed


def pair_key(a: hci.Address, b: hci.Address) -> tuple[str, str]:
    """The key of the connection between the devices with addresses a and b (either order)."""
    x, y = str(a), str(b)
    return (x, y) if x <= y else (y, x)


class _Pdu:
    """One queued LL PDU (an L2CAP PDU of ACL data, or an LL control PDU)."""

    __slots__ = ("queued", "left", "deliver")

    def __init__(self, queued: float, fragments: int, deliver: Callable[[], None]):
        self.queued = queued  # loop time it was queued
        self.left = fragments  # LL PDUs still to go on the air
        self.deliver = deliver


class AirLink:
    """One LE connection between two controllers of the air (see the module docstring)."""

    def __init__(self, air: Air, central, peripheral, central_address: hci.Address,
                 peripheral_address: hci.Address, interval: int, latency: int, timeout: int):
        self.air = air
        self.loop = asyncio.get_running_loop()
        self.central, self.peripheral = central, peripheral
        self.central_address, self.peripheral_address = central_address, peripheral_address
        self.key = pair_key(central_address, peripheral_address)
        # The central's connection object, to drop that one only (not a later one).
        self.central_connection = central.le_connections.get(peripheral_address)
        self.anchor = self.loop.time()
        self.interval_s = interval * 1.25e-3
        self.latency = latency
        self.timeout_s = timeout * 10e-3
        # Timed air: (instant, interval_s, timeout_s) of a connection update not yet in effect.
        self.update: tuple[float, float, float] | None = None
        self.event_time = self.anchor  # the connection event being carried out (timed air)
        # Each way's PDUs, by the sender's address (central's first: it sends first in an event).
        self.queues: dict[str, deque[_Pdu]] = {str(central_address): deque(), str(peripheral_address): deque()}
        self.in_range = air.hears(central, peripheral) is not None
        self.established = self.in_range  # did the CONNECT_IND reach the peripheral?
        self.closed = False
        self.event_timer: asyncio.TimerHandle | None = None
        self.supervision: asyncio.TimerHandle | None = None
        if not self.established:
            self.supervision = self.loop.call_later(ESTABLISH_EVENTS * self.interval_s, self._establishment_failed)

    # -- what the air hands over ---------------------------------------------------------
    def not_taken(self) -> None:
        """The CONNECT_IND reached the peripheral, which did not take it: as if it had
        not reached it, the central's connection fails ESTABLISH_EVENTS intervals after it."""
        if self.closed or not self.established:
            return
        self.established = False
        for timer in (self.event_timer, self.supervision):
            if timer is not None:
                timer.cancel()
        self.event_timer = None
        for queue in self.queues.values():
            queue.clear()
        self.supervision = self.loop.call_at(self.anchor + ESTABLISH_EVENTS * self.interval_s,
                                             self._establishment_failed)

    def send(self, sender_address: hci.Address, deliver: Callable[[], None], size: int = 0) -> None:
        """Carry one PDU of ``size`` octets (0: an LL control PDU) from ``sender_address``;
        ``deliver`` hands it to the receiving controller."""
        if self.closed:
            return
        queue = self.queues[str(sender_address)]
        if not self.air.timed and self.in_range and self.established and not queue:
            # Untimed and in range: at once, as Bumble's LocalLink does.
            self.loop.call_soon(deliver)
            return
        queue.append(_Pdu(self.loop.time(), max(1, math.ceil(size / LL_PAYLOAD)), deliver))
        self._kick()

    def parameters_updated(self, interval: int, latency: int, timeout: int) -> None:
        """An LL_CONNECTION_UPDATE_IND (or LL_CONNECTION_RATE_IND) reached the peer:
        untimed, the new parameters hold now; timed, from the instant on."""
        interval_s, timeout_s = interval * 1.25e-3, timeout * 10e-3
        self.latency = latency
        if not self.air.timed:
            self.interval_s, self.timeout_s = interval_s, timeout_s
            return
        self._apply_update(self.loop.time())
        self.update = (self.event_time + INSTANT_EVENTS * self.interval_s, interval_s, timeout_s)

    def range_changed(self) -> None:
        """The range matrix changed: hold or release the PDUs, start or stop the supervision timer."""
        in_range = self.air.hears(self.central, self.peripheral) is not None
        if self.closed or not self.established or in_range == self.in_range:
            return
        self.in_range = in_range
        if not in_range:
            self._apply_update(self.loop.time())
            self.supervision = self.loop.call_later(self.timeout_s, self._supervision_timeout)
            if self.event_timer is not None:
                self.event_timer.cancel()
                self.event_timer = None
            return
        if self.supervision is not None:
            self.supervision.cancel()
            self.supervision = None
        self._kick()

    def close(self) -> None:
        """The connection is over (terminated, timed out, or replaced): drop what is queued."""
        self.closed = True
        for timer in (self.event_timer, self.supervision):
            if timer is not None:
                timer.cancel()
        self.event_timer = self.supervision = None
        for queue in self.queues.values():
            queue.clear()
        if self.air.links.get(self.key) is self:
            del self.air.links[self.key]

    # -- delivery ---------------------------------------------------------------------
    def _kick(self) -> None:
        """Deliver what waits, if in range: untimed at once (in the order queued), timed at the next event."""
        if self.closed or not self.in_range or not self.established:
            return
        if not self.air.timed:
            held = sorted((pdu for queue in self.queues.values() for pdu in queue), key=lambda pdu: pdu.queued)
            for queue in self.queues.values():
                queue.clear()
            for pdu in held:
                self.loop.call_soon(pdu.deliver)
            return
        if self.event_timer is None and any(self.queues.values()):
            self._schedule(self._next_event(self.loop.time()))

    def _schedule(self, when: float) -> None:
        self.event_timer = self.loop.call_at(when, self._connection_event, when)

    def _connection_event(self, when: float) -> None:
        """Timed air: one connection event at ``when`` (its nominal time): up to
        PDUS_PER_EVENT LL PDUs each way, of those queued before it."""
        self.event_timer = None
        self._apply_update(when)
        self.event_time = when
        for queue in list(self.queues.values()):
            slots = PDUS_PER_EVENT
            while queue and slots and queue[0].queued < when:
                pdu = queue[0]
                sent = min(slots, pdu.left)
                pdu.left -= sent
                slots -= sent
                if pdu.left == 0:
                    queue.popleft()
                    pdu.deliver()
                    if self.closed:
                        return
        if self.in_range and any(self.queues.values()):
            self._schedule(self._next_event(when))

    def _apply_update(self, now: float) -> None:
        """A connection update whose instant has come: the new interval counts from the instant."""
        if self.update is not None and now >= self.update[0] - 1e-9:
            self.anchor, self.interval_s, self.timeout_s = self.update
            self.update = None

    def _next_event(self, after: float) -> float:
        """The time of the first connection event strictly after ``after``."""
        self._apply_update(after)
        n = math.floor((after - self.anchor) / self.interval_s) + 1
        when = self.anchor + n * self.interval_s
        if when <= after + 1e-9:  # rounding, ``after`` being an event itself
            when += self.interval_s
        if self.update is not None:
            when = min(when, self.update[0])  # the instant is an event (of the old interval)
        return when

    # -- the end ----------------------------------------------------------------------
    def _describe(self, reason: int) -> dict:
        """The host/device names and the handles of both ends, for an event."""
        info: dict = {"reason": reason}
        for controller, peer in ((self.central, self.peripheral_address), (self.peripheral, self.central_address)):
            role = self.air.role_of(controller)
            connection = controller.le_connections.get(peer)
            handle = connection.handle if connection is not None else None
            if role is None:
                continue
            kind, name = role
            info[kind] = name
            info["handle" if kind == "host" else f"{kind}_handle"] = handle
        return info

    def _drop(self, controller, peer: hci.Address, reason: int) -> None:
        connection = controller.le_connections.get(peer)
        if connection is not None and (controller is not self.central or connection is self.central_connection):
            controller.on_le_disconnected(connection, reason)

    def _supervision_timeout(self) -> None:
        """Out of range for the whole supervision timeout: both ends drop the connection (0x08)."""
        self.supervision = None
        reason = hci.HCI_CONNECTION_TIMEOUT_ERROR
        emit({"event": "supervision_timeout", **self._describe(reason), "timeout_ms": round(self.timeout_s * 1000)})
        self._drop(self.central, self.peripheral_address, reason)
        self._drop(self.peripheral, self.central_address, reason)
        self.close()

    def _establishment_failed(self) -> None:
        """The CONNECT_IND never reached the peripheral, or it did not take it:
        the central's connection fails (0x3E)."""
        self.supervision = None
        if self.central.le_connections.get(self.peripheral_address) is not self.central_connection:
            self.close()  # the central's host let it go first (or it was replaced): nothing to fail
            return
        reason = hci.HCI_CONNECTION_FAILED_TO_BE_ESTABLISHED_ERROR
        emit({"event": "connection_failed", **self._describe(reason)})
        self._drop(self.central, self.peripheral_address, reason)
        self.close()
