"""A peer's connections: what it does when a central connects (security request,
connection parameter update, its own Exchange MTU Request, periodic
notifications) and when the link ends, and the L2CAP signalling it observes.
"""

from __future__ import annotations

import asyncio
import logging

from bumble import att, l2cap, smp
from bumble.gatt import ClientCharacteristicConfigurationBits
from bumble.device import Connection, Device

logger = logging.getLogger("ledperipheral")

_OP = att.Opcode


class LinkMixin:
    """LedPeripheral's connection part (peripheral.py): uses self.opts,
    self.device, self.connection, self.chars, self.emit, self._spawn and the
    fault / security state it resets on each connection."""

    def _on_connection(self, connection: Connection) -> None:
        self.connection = connection
        if not self.opts.faults_once:
            self._request_counts.clear()
        self._mutation = None
        self._connection_count += 1
        self._peer_auth_req = None
        self.emit(
            "connected",
            peer=str(connection.peer_address).split("/")[0],
            peer_type=int(connection.peer_address.address_type),
            handle=connection.handle,
            interval_ms=connection.parameters.connection_interval,
            latency=connection.parameters.peripheral_latency,
        )
        connection.on(Connection.EVENT_DISCONNECTION, lambda reason: self._on_disconnection(connection, reason))
        self._watch_security(connection)
        connection.on(
            Connection.EVENT_CONNECTION_ATT_MTU_UPDATE,
            lambda *_: self.emit("mtu", mtu=connection.att_mtu),
        )
        connection.on(
            Connection.EVENT_CONNECTION_PARAMETERS_UPDATE,
            lambda *_: self.emit(
                "conn_params",
                interval_ms=connection.parameters.connection_interval,
                latency=connection.parameters.peripheral_latency,
                timeout_ms=connection.parameters.supervision_timeout,
            ),
        )
        if self.opts.security_request:
            self._spawn(self._send_security_request(connection))
        if self.opts.conn_update:
            self._spawn(self._request_conn_update(connection))
        if self.opts.notify_every_ms:
            self._spawn(self._notify_periodically(connection))
        if self.opts.mtu:
            self._spawn(self._request_mtu(connection))

    def _on_disconnection(self, connection: Connection, reason: int) -> None:
        if self.connection is connection:
            self.connection = None
        if self._indication is not None:
            handle, _, timer = self._indication
            timer.cancel()
            self._indication = None
            self.emit("indication_unconfirmed", handle=handle, disconnected=True)
        if self.opts.forget_bonds and self._connection_count == self.opts.forget_bonds:
            self.forget_bonds()
        self.emit("disconnected", reason=int(reason))
        if not self._stopping:
            # Real firmware advertises again as soon as the link is gone (or,
            # readv_delay, once it has rebooted).
            if self.opts.readv_delay_ms:
                self._spawn(self._advertise_later(self.opts.readv_delay_ms))
            else:
                self._spawn(self.advertise())

    async def _send_security_request(self, connection: Connection) -> None:
        assert self.device is not None
        self.device.request_pairing(connection)  # AuthReq from _pairing_config
        config = self._pairing_config(connection)
        auth_req = smp.AuthReq.from_booleans(bonding=config.bonding, sc=config.sc, mitm=config.mitm)
        self.emit("security_request", auth_req=int(auth_req))

    async def _request_conn_update(self, connection: Connection) -> None:
        assert self.device is not None
        if self.opts.conn_update_delay_ms:
            await asyncio.sleep(self.opts.conn_update_delay_ms / 1000)
        # Same values as seen from real peripherals: 30-50 ms, latency 0, 4 s
        # (units: 1.25 ms for intervals, 10 ms for the timeout).
        manager = self.device.l2cap_channel_manager
        imin, imax, latency, timeout = self.opts.conn_update_params or (24, 40, 0, 400)
        self.emit("conn_update", interval_min_ms=imin * 1.25, interval_max_ms=imax * 1.25, latency=latency,
                  timeout_ms=timeout * 10.0, raw=[imin, imax, latency, timeout])
        try:
            result = await asyncio.wait_for(
                manager.update_connection_parameters(connection, imin, imax, latency, timeout), 5.0
            )
            self.emit("conn_update_response", accepted=result == 0, result=int(result))
        except asyncio.TimeoutError:
            self.emit("conn_update_timeout")
        finally:
            # Bumble keeps the pending future forever if no answer came; clear
            # it so that the next connection can ask again.
            manager.connection_parameters_update_response = None

    async def _request_mtu(self, connection: Connection) -> None:
        """mtu=N: the peer's own Exchange MTU Request, sent as soon as connected.

        Sent raw and answered through a hook on the connection's GATT client, so
        that the effective ATT_MTU is applied synchronously when the response
        arrives (Bumble's client applies it a loop iteration later, which races
        with the server building its next response).
        """
        assert self.opts.mtu is not None and self.device is not None
        mtu = self.opts.mtu
        client = connection.gatt_client
        inner = client.on_gatt_pdu
        answer: asyncio.Future = asyncio.get_running_loop().create_future()

        def hook(pdu) -> None:
            op = int(pdu.op_code)
            if not answer.done() and (op == _OP.ATT_EXCHANGE_MTU_RESPONSE or (
                    op == _OP.ATT_ERROR_RESPONSE and pdu.request_opcode_in_error == _OP.ATT_EXCHANGE_MTU_REQUEST)):
                if op == _OP.ATT_EXCHANGE_MTU_RESPONSE:
                    server_rx = int(pdu.server_rx_mtu)
                    connection.att_mtu = max(23, min(mtu, server_rx))
                    answer.set_result(server_rx)
                else:
                    answer.set_exception(RuntimeError(f"Error Response 0x{int(pdu.error_code):02x}"))
                return
            inner(pdu)

        client.on_gatt_pdu = hook
        self.device.send_l2cap_pdu(connection.handle, att.ATT_CID, bytes([_OP.ATT_EXCHANGE_MTU_REQUEST]) + mtu.to_bytes(2, "little"))
        self.emit("mtu_request", mtu=mtu)
        try:
            server_rx = await asyncio.wait_for(answer, 5.0)
            self.emit("mtu_exchanged", mtu=connection.att_mtu, server_rx_mtu=server_rx)
        except asyncio.TimeoutError:
            self.emit("mtu_request_timeout")
        except Exception as error:  # noqa: BLE001 - an Error Response
            self.emit("mtu_request_failed", detail=str(error))

    async def _notify_periodically(self, connection: Connection) -> None:
        """harness notify_every=MS: notify the button value while subscribed."""
        assert self.device is not None
        button = self.chars["button"]
        while self.connection is connection:
            await asyncio.sleep(self.opts.notify_every_ms / 1000)
            cccd = self.device.gatt_server.subscribers.get(connection, {}).get(button.handle)
            if cccd and cccd[0] & ClientCharacteristicConfigurationBits.NOTIFICATION and self.connection is connection:
                value = bytes([self.last_command])
                try:
                    await self.device.notify_subscriber(connection, button, value)
                except Exception as error:  # noqa: BLE001 - link went away meanwhile
                    logger.info("periodic notification failed: %s", error)
                    return
                self.emit("notify", char="button", handle=button.handle, value=value.hex(),
                          subscribed=True, periodic=True)

    def _install_signal_observer(self, device: Device) -> None:
        manager = device.l2cap_channel_manager
        inner = manager.on_control_frame

        def observe(connection, cid, frame) -> None:
            self.emit("l2cap_signal", code=int(frame.code), pdu=bytes(frame).hex())
            pending = manager.connection_parameters_update_response
            if frame.code == l2cap.CommandCode.L2CAP_COMMAND_REJECT and pending is not None and not pending.done():
                # Command Reject in place of a Connection Parameter Update Response
                pending.set_result(-1)
            inner(connection, cid, frame)

        manager.on_control_frame = observe

    def _on_subscription(self, bearer, characteristic, notify: bool, indicate: bool) -> None:
        entry = self._by_handle.get(characteristic.handle)
        role = entry[0].role if entry else str(characteristic.uuid)
        self.emit("subscribed", char=role, notify=bool(notify), indicate=bool(indicate))

