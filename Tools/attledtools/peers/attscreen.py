"""A peer's ATT screen: every ATT PDU addressed to the GATT server passes here
before Bumble sees it, so that characteristic properties, value lengths and
encryption are enforced as real firmware would (see the package's doc), and
the faults and unsupported requests get their turn.
"""

from __future__ import annotations

from bumble import att
from bumble.device import Device
from bumble.gatt import Characteristic, Descriptor

from attledtools.peers.profiles import Props

# ATT opcodes and error codes used here (Core Vol 3, Part F, 3.4.1.1): Bumble's own.
_OP = att.Opcode
OP_READ_REQUEST = _OP.ATT_READ_REQUEST
OP_READ_BLOB_REQUEST = _OP.ATT_READ_BLOB_REQUEST
OP_WRITE_REQUEST = _OP.ATT_WRITE_REQUEST
OP_WRITE_COMMAND = _OP.ATT_WRITE_COMMAND
OP_SIGNED_WRITE_COMMAND = _OP.ATT_SIGNED_WRITE_COMMAND
OP_PREPARE_WRITE_REQUEST = _OP.ATT_PREPARE_WRITE_REQUEST
OP_ERROR_RESPONSE = _OP.ATT_ERROR_RESPONSE
OP_HANDLE_VALUE_CONFIRMATION = _OP.ATT_HANDLE_VALUE_CONFIRMATION
ATT_READ_NOT_PERMITTED = att.ATT_READ_NOT_PERMITTED_ERROR
ATT_WRITE_NOT_PERMITTED = att.ATT_WRITE_NOT_PERMITTED_ERROR
ATT_INVALID_ATTRIBUTE_VALUE_LENGTH = att.ATT_INVALID_ATTRIBUTE_LENGTH_ERROR
ATT_INSUFFICIENT_ENCRYPTION = att.ATT_INSUFFICIENT_ENCRYPTION_ERROR
ATT_REQUEST_NOT_SUPPORTED = att.ATT_REQUEST_NOT_SUPPORTED_ERROR


class AttScreenMixin:
    """LedPeripheral's ATT screen (peripheral.py): uses self.opts, self.emit,
    self._by_handle, self._indication, self._mutation, the fault part
    (_apply_faults, _mutate_response, _indication_confirmed) and, for a
    write it accepts, self._accept_write."""

    # -- ATT screening (property enforcement) -----------------------------------
    def _install_att_screen(self, device: Device) -> None:
        server = device.gatt_server
        inner = server.on_gatt_pdu  # bound method of the stock server

        def screened(bearer, pdu) -> None:
            try:
                raw = bytes(pdu)
            except Exception:  # noqa: BLE001
                raw = b""
            self.emit("att", op=int(pdu.op_code), pdu=raw.hex())
            if int(pdu.op_code) == OP_HANDLE_VALUE_CONFIRMATION and self._indication is not None:
                self._indication_confirmed()
                return
            if int(pdu.op_code) in self.opts.unsupported:
                handle = raw[1] | raw[2] << 8 if len(raw) >= 3 else 0
                server.send_gatt_pdu(bearer, bytes([OP_ERROR_RESPONSE, int(pdu.op_code)]) + handle.to_bytes(2, "little") + bytes([ATT_REQUEST_NOT_SUPPORTED]))
                self.emit("unsupported", op=int(pdu.op_code))
                return
            if not self._apply_faults(server, bearer, int(pdu.op_code)):
                return
            if self._screen(server, bearer, pdu):
                inner(bearer, pdu)

        # Server.on_gatt_pdu is looked up on the instance by the device's ATT
        # dispatch, so an instance attribute replaces it for this device only.
        server.on_gatt_pdu = screened

        # Every response goes through send_response (Bumble's handlers and
        # ours): the place where an armed fault mutates it.
        send_inner = server.send_response

        def send_response(bearer, response) -> None:
            if self._mutation is None:
                send_inner(bearer, response)
                return
            fault, saved_mtu = self._mutation
            self._mutation = None
            self._mutate_response(server, send_inner, bearer, response, fault, saved_mtu)

        server.send_response = send_response

    def _screen(self, server, bearer, pdu) -> bool:
        """Return True to let Bumble's server handle ``pdu`` normally."""
        op = int(pdu.op_code)
        if op in (OP_WRITE_REQUEST, OP_WRITE_COMMAND, OP_SIGNED_WRITE_COMMAND, OP_PREPARE_WRITE_REQUEST):
            return self._screen_write(server, bearer, pdu, op)
        if op in (OP_READ_REQUEST, OP_READ_BLOB_REQUEST):
            return self._screen_read(server, bearer, pdu, op)
        return True

    def _error_response(self, server, bearer, op: int, handle: int, error: int) -> None:
        server.send_response(
            bearer,
            att.ATT_Error_Response(
                request_opcode_in_error=op,
                attribute_handle_in_error=handle,
                error_code=error,
            ),
        )

    def _screen_read(self, server, bearer, pdu, op: int) -> bool:
        handle = pdu.attribute_handle
        attribute = server.get_attribute(handle)
        if isinstance(attribute, Characteristic) and not (attribute.properties & Props.READ):
            self._error_response(server, bearer, op, handle, ATT_READ_NOT_PERMITTED)
            entry = self._by_handle.get(handle)
            self.emit(
                "read_rejected",
                char=entry[0].role if entry else str(attribute.uuid),
                uuid=str(attribute.uuid).lower(),
                handle=handle,
                error=ATT_READ_NOT_PERMITTED,
            )
            return False
        if attribute is not None and self._needs_encryption(attribute, bearer, read=True):
            # Bumble's server answers this one itself (Attribute.read_value):
            # ATT Error 0x0F Insufficient Encryption.
            entry = self._by_handle.get(handle)
            self.emit(
                "read_rejected",
                char=entry[0].role if entry else type(attribute).__name__,
                uuid=str(attribute.type).lower(),
                handle=handle,
                error=ATT_INSUFFICIENT_ENCRYPTION,
                reason="insufficient encryption",
            )
        return True

    @staticmethod
    def _needs_encryption(attribute, bearer, read: bool) -> bool:
        """True if ``attribute`` needs an encrypted link for this access and the link is not."""
        flag = att.Attribute.READ_REQUIRES_ENCRYPTION if read else att.Attribute.WRITE_REQUIRES_ENCRYPTION
        if not (getattr(attribute, "permissions", 0) & flag):
            return False
        connection = getattr(bearer, "connection", bearer)  # an EATT bearer has .connection
        return not getattr(connection, "encryption", 0)

    def _screen_write(self, server, bearer, pdu, op: int) -> bool:
        handle = pdu.attribute_handle
        value = bytes(pdu.part_attribute_value if op == OP_PREPARE_WRITE_REQUEST else pdu.attribute_value)
        is_request = op in (OP_WRITE_REQUEST, OP_PREPARE_WRITE_REQUEST)
        op_name = {
            OP_WRITE_REQUEST: "request",
            OP_WRITE_COMMAND: "command",
            OP_SIGNED_WRITE_COMMAND: "signed",
            OP_PREPARE_WRITE_REQUEST: "prepare",
        }[op]
        attribute = server.get_attribute(handle)
        if attribute is None:
            return True  # Bumble answers Invalid Handle (0x01) / drops commands

        entry = self._by_handle.get(handle)
        role = entry[0].role if entry else None

        def drop_unencrypted() -> bool:
            """secure=enc, link not encrypted: a request gets 0x0F, a command is dropped."""
            if is_request:
                return reject(ATT_INSUFFICIENT_ENCRYPTION, "insufficient encryption")
            self.emit(
                "write_dropped",
                char=role or type(attribute).__name__,
                uuid=str(attribute.type).lower(),
                handle=handle,
                value=value.hex(),
                op=op_name,
                reason="insufficient encryption",
            )
            return False

        def reject(error: int, why: str) -> bool:
            if is_request:
                self._error_response(server, bearer, op, handle, error)
            self.emit(
                "rejected",
                char=role or type(attribute).__name__,
                uuid=str(attribute.type).lower(),
                handle=handle,
                value=value.hex(),
                op=op_name,
                error=error,
                responded=is_request,
                why=why,
            )
            return False

        # 1. Properties / permissions
        if isinstance(attribute, Characteristic):
            required = {
                OP_WRITE_REQUEST: Props.WRITE,
                OP_PREPARE_WRITE_REQUEST: Props.WRITE,
                OP_WRITE_COMMAND: Props.WRITE_WITHOUT_RESPONSE,
                OP_SIGNED_WRITE_COMMAND: Props.AUTHENTICATED_SIGNED_WRITES,
            }[op]
            if not (attribute.properties & required):
                return reject(ATT_WRITE_NOT_PERMITTED, f"characteristic lacks {required.name}")
        elif isinstance(attribute, Descriptor):
            if not (attribute.permissions & att.Attribute.Permissions.WRITEABLE):
                return reject(ATT_WRITE_NOT_PERMITTED, "descriptor is not writable")
            if self._needs_encryption(attribute, bearer, read=False):
                return drop_unencrypted()
            return True
        else:
            # Service / include / characteristic declarations are read-only.
            return reject(ATT_WRITE_NOT_PERMITTED, "declaration is not writable")

        if entry is None:
            return True  # a standard characteristic (GAP/GATT service): Bumble's job
        if self._needs_encryption(attribute, bearer, read=False):
            return drop_unencrypted()

        # 2. Our one-byte characteristics: handle Write Request / Command here.
        if op == OP_PREPARE_WRITE_REQUEST:
            return True  # queued by Bumble; length checked at Execute time
        if len(value) != 1:
            return reject(ATT_INVALID_ATTRIBUTE_VALUE_LENGTH, f"length {len(value)} != 1")
        if is_request:
            server.send_response(bearer, att.ATT_Write_Response())
        self._accept_write(role, value, op_name)
        return False

