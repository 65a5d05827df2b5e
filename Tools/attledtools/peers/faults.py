"""What a peer's faults (FAULT_HELP in faultspec.py) do on the air: PDUs sent
before the answer, answers withheld, responses mutated, links cut, and the
indications whose confirmation it waits for.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bumble import att, hci
from bumble.core import UUID
from bumble.gatt import Characteristic

from attledtools.peers.faultspec import REQUEST_OPCODE_NAMES, RESPONSE_FOR, Fault

logger = logging.getLogger("ledperipheral")

_OP = att.Opcode
INDICATION_TIMEOUT_S = 2.0
OVERSIZE_BUILD_MTU = 517
GATT_SERVICE_CHANGED_UUID = UUID.from_16_bits(0x2A05)


class FaultMixin:
    """LedPeripheral's fault part (peripheral.py): uses self.opts, self.chars,
    self.spec, self.connection, self.emit, self._spawn, and keeps
    self._request_counts, self._mutation and self._indication."""

    def _emit_fault(self, fault: Fault, **fields: Any) -> None:
        self.emit("fault", kind=fault.kind, request=fault.request, nth=fault.nth, **fields)

    def _first_value_handle(self) -> int:
        return self.chars[self.spec.chars[0].role].handle

    def _apply_faults(self, server, bearer, op: int) -> bool:
        """Run the faults triggered by this request; False when it must not be answered."""
        if op not in REQUEST_OPCODE_NAMES:
            return True
        if self._mutation is not None:  # an armed mutation whose response never came
            bearer.att_mtu = self._mutation[1]
            self._mutation = None
        nth = self._request_counts[op] = self._request_counts.get(op, 0) + 1
        active = [f for f in self.opts.faults if f.op == op and f.nth == nth]
        if not active:
            return True
        # 1. What is sent before the answer (same ATT bearer, so it arrives first).
        for fault in active:
            if fault.kind == "spurious_error":
                named = fault.arg if fault.arg is not None else _OP.ATT_READ_REQUEST
                raw = bytes([_OP.ATT_ERROR_RESPONSE, named, 0x01, 0x00, att.ATT_ATTRIBUTE_NOT_FOUND_ERROR])
                server.send_gatt_pdu(bearer, raw)
                self._emit_fault(fault, pdu=raw.hex(), named_request=named)
            elif fault.kind == "stray_notify":
                count = fault.arg if fault.arg is not None else 3
                handles = self._undeclared_handles(server, count)
                for handle in handles:
                    server.send_gatt_pdu(bearer, bytes([_OP.ATT_HANDLE_VALUE_NOTIFICATION]) + handle.to_bytes(2, "little") + b"\xde\xad")
                self._emit_fault(fault, handles=handles)
            elif fault.kind == "flood":
                count = fault.arg if fault.arg is not None else 300
                handle = self._first_value_handle()
                prefix = bytes([_OP.ATT_HANDLE_VALUE_NOTIFICATION]) + handle.to_bytes(2, "little")
                for i in range(count):
                    server.send_gatt_pdu(bearer, prefix + bytes([i & 0xFF]))
                self._emit_fault(fault, count=count, handle=handle)
            elif fault.kind in ("indicate", "service_changed"):
                if fault.kind == "indicate":
                    handle = fault.arg if fault.arg is not None else self._first_value_handle()
                    value = b"\x01"
                else:
                    handle = self._service_changed_handle(server)
                    span = fault.arg if fault.arg is not None else 0x0001FFFF
                    value = (span >> 16).to_bytes(2, "little") + (span & 0xFFFF).to_bytes(2, "little")
                raw = bytes([_OP.ATT_HANDLE_VALUE_INDICATION]) + handle.to_bytes(2, "little") + value
                if self._indication is not None:
                    self._indication[2].cancel()
                timer = asyncio.get_running_loop().call_later(INDICATION_TIMEOUT_S, self._indication_unconfirmed)
                self._indication = (handle, asyncio.get_running_loop().time(), timer)
                server.send_gatt_pdu(bearer, raw)
                self._emit_fault(fault, pdu=raw.hex(), handle=handle)
        # 2. What happens to the answer.
        for fault in active:
            if fault.kind == "disconnect_on":
                reason = fault.arg if fault.arg is not None else hci.HCI_REMOTE_USER_TERMINATED_CONNECTION_ERROR
                self._emit_fault(fault, reason=reason)
                self._disconnect(reason)
                return False
            if fault.kind == "no_answer":
                self._emit_fault(fault)
                return False
        for fault in active:
            if fault.kind in ("wrong_opcode", "truncate", "oversize", "disconnect_after", "corrupt"):
                saved_mtu = bearer.att_mtu
                if fault.kind == "oversize":
                    bearer.att_mtu = OVERSIZE_BUILD_MTU  # Bumble builds the response for this MTU
                self._mutation = (fault, saved_mtu)
                break
        return True

    def _service_changed_handle(self, server) -> int:
        """The value handle of the Service Changed characteristic (0x2A05)."""
        for attribute in server.attributes:
            if isinstance(attribute, Characteristic) and attribute.uuid == GATT_SERVICE_CHANGED_UUID:
                return attribute.handle
            if getattr(attribute, "type", None) == GATT_SERVICE_CHANGED_UUID:
                return attribute.handle
        raise ValueError("fault_service_changed: the device has no Service Changed characteristic (hash=0?)")

    def _undeclared_handles(self, server, count: int) -> list[int]:
        handles: list[int] = []
        for handle in (0x0000, 0xFFFE, 0x1234, 0xBEEF, 0x7FFF, *range(0xF000, 0x10000)):
            if len(handles) == count:
                break
            if handle == 0 or server.get_attribute(handle) is None:
                handles.append(handle)
        return handles

    def _mutate_response(self, server, send_inner, bearer, response, fault: Fault, saved_mtu: int) -> None:
        raw = bytearray(bytes(response))
        original = raw[0] if raw else -1
        if fault.kind == "disconnect_after":
            send_inner(bearer, response)
            reason = fault.arg if fault.arg is not None else hci.HCI_REMOTE_USER_TERMINATED_CONNECTION_ERROR
            self._emit_fault(fault, response=original, reason=reason)
            self._disconnect(reason)
            return
        if fault.kind == "wrong_opcode":
            expected = RESPONSE_FOR[fault.op]
            raw[0] = fault.arg if fault.arg is not None else (_OP.ATT_READ_BY_TYPE_RESPONSE if expected == _OP.ATT_READ_RESPONSE else _OP.ATT_READ_RESPONSE)
        elif fault.kind == "truncate":
            cut = fault.arg if fault.arg is not None else 1
            raw = raw[: max(1, len(raw) - cut)]
        elif fault.kind == "oversize":
            bearer.att_mtu = saved_mtu
            raw = self._oversized(raw, saved_mtu)
        elif fault.kind == "corrupt" and len(raw) > 1:
            raw[-1] ^= 0xFF
        self._emit_fault(fault, response=original, pdu=bytes(raw).hex(), length=len(raw), mtu=saved_mtu)
        server.send_gatt_pdu(bearer, bytes(raw))

    @staticmethod
    def _oversized(raw: bytearray, mtu: int) -> bytearray:
        """Make ``raw`` longer than ``mtu`` while keeping it well formed where possible."""
        op = raw[0] if raw else 0
        entry = b"\x00"
        if op in (_OP.ATT_READ_BY_TYPE_RESPONSE, _OP.ATT_READ_BY_GROUP_TYPE_RESPONSE) and len(raw) > 2 and raw[1] and (len(raw) - 2) % raw[1] == 0:
            entry = bytes(raw[-raw[1]:])  # one more whole attribute data entry
        elif op == _OP.ATT_FIND_BY_TYPE_VALUE_RESPONSE and len(raw) >= 5:
            entry = bytes(raw[-4:])
        elif op == _OP.ATT_FIND_INFORMATION_RESPONSE and len(raw) >= 2:
            entry = bytes(raw[-(4 if raw[1] == 1 else 18):])
        while len(raw) <= mtu:
            raw += entry
        return raw

    def _disconnect(self, reason: int) -> None:
        connection = self.connection
        if connection is None:
            return

        async def go() -> None:
            try:
                await asyncio.wait_for(connection.disconnect(reason), 2.0)
            except Exception as error:  # noqa: BLE001 - already gone
                logger.info("fault disconnect: %s", error)

        self._spawn(go())

    def _indication_confirmed(self) -> None:
        assert self._indication is not None
        handle, t0, timer = self._indication
        timer.cancel()
        self._indication = None
        ms = (asyncio.get_running_loop().time() - t0) * 1000
        self.emit("indication_confirmed", handle=handle, ms=round(ms, 2))

    def _indication_unconfirmed(self) -> None:
        if self._indication is None:
            return
        handle = self._indication[0]
        self._indication = None
        self.emit("indication_unconfirmed", handle=handle, after_s=INDICATION_TIMEOUT_S)

