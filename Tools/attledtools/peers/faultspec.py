"""The fault options of a peer (``fault_KIND=TRIGGER[/ARG]``): the ATT requests
that trigger them, their kinds, their help text and their parsed form.

What each fault does on the air is faults.py (FaultMixin).
"""

from __future__ import annotations

import dataclasses

from bumble import att

_OP = att.Opcode

# ATT requests a fault can be triggered by: name -> opcode.
REQUEST_NAMES: dict[str, int] = {
    "mtu": _OP.ATT_EXCHANGE_MTU_REQUEST,
    "find_info": _OP.ATT_FIND_INFORMATION_REQUEST,
    "find_by_type": _OP.ATT_FIND_BY_TYPE_VALUE_REQUEST,
    "read_by_type": _OP.ATT_READ_BY_TYPE_REQUEST,
    "read": _OP.ATT_READ_REQUEST,
    "read_blob": _OP.ATT_READ_BLOB_REQUEST,
    "read_multiple": _OP.ATT_READ_MULTIPLE_REQUEST,
    "read_multiple_variable": _OP.ATT_READ_MULTIPLE_VARIABLE_REQUEST,
    "read_by_group": _OP.ATT_READ_BY_GROUP_TYPE_REQUEST,
    "write": _OP.ATT_WRITE_REQUEST,
    "prepare_write": _OP.ATT_PREPARE_WRITE_REQUEST,
    "execute_write": _OP.ATT_EXECUTE_WRITE_REQUEST,
}
REQUEST_OPCODE_NAMES = {op: name for name, op in REQUEST_NAMES.items()}
# Request opcode -> the response opcode the ATT client expects.
RESPONSE_FOR = {op: op + 1 for op in REQUEST_NAMES.values()}

FAULT_KINDS = (
    "disconnect_on", "disconnect_after", "no_answer", "wrong_opcode", "truncate", "oversize",
    "spurious_error", "stray_notify", "flood", "indicate", "corrupt", "service_changed",
)

FAULT_HELP = """\
Fault options (device keys), each fault_KIND=TRIGGER[/ARG]; several may be given.
TRIGGER is an ATT request name, optionally #N for its N-th occurrence on the
connection (default #1): mtu find_info find_by_type read_by_type read read_blob
read_multiple read_by_group write prepare_write execute_write (or a hex opcode).
  fault_disconnect_on=REQ[/REASON]    do not answer REQ: disconnect (default 0x13)
  fault_disconnect_after=REQ[/REASON] answer REQ, then disconnect at once
  fault_no_answer=REQ                 never answer REQ (the link stays up)
  fault_wrong_opcode=REQ[/OPCODE]     answer REQ with its response's opcode
                                      replaced (default Read Response 0x0b,
                                      Read By Type Response 0x09 for a read)
  fault_truncate=REQ[/N]              cut N bytes (default 1) off the response:
                                      a Read By Type Response's data then no
                                      longer divides by its length byte
  fault_oversize=REQ                  build the response for ATT_MTU 517 whatever
                                      was negotiated (list responses carry every
                                      entry; padded with whole entries / zero
                                      bytes until longer than ATT_MTU)
  fault_spurious_error=REQ[/OPCODE]   first send an Error Response naming request
                                      OPCODE (default Read Request 0x0a) that was
                                      never made, then answer REQ normally
  fault_stray_notify=REQ[/COUNT]      first send COUNT (default 3) notifications
                                      for handles not in the database
                                      (0x0000, 0xfffe, 0x1234, ...), then answer
  fault_flood=REQ[/COUNT]             first send COUNT (default 300) notifications
                                      of the first LED characteristic back to
                                      back, then answer
  fault_indicate=REQ[/HANDLE]         first send a Handle Value Indication (default:
                                      the first LED characteristic's value handle),
                                      then answer; reports indication_confirmed
                                      {ms} or indication_unconfirmed (after 2 s)
  fault_service_changed=REQ[/RANGE]   first indicate Service Changed (the GATT
                                      service's 0x2A05 value handle) for the
                                      handle range RANGE = 0xSSSSEEEE (default
                                      0x0001ffff: everything), then answer;
                                      reports indication_confirmed as above
  fault_corrupt=REQ                   flip (XOR 0xff) the last byte of the
                                      response: for prepare_write, the echoed
                                      part value no longer matches what was
                                      sent (the server still queued the right
                                      bytes)
Every fault applied is reported as {"event":"fault","kind":..,"request":..,"nth":N,...}.
Related keys: mtu=23 (ask for / allow only a 23-byte ATT_MTU),
unsupported=OP[+OP...] (hex ATT request opcodes, e.g. 20+0e: answered with
Error Response 0x06 Request Not Supported, as a server of an older ATT
version; reported as {"event":"unsupported","op":N}),
conn_update_params=IMIN,IMAX,LAT,TO (e.g. 4,2,600,5: illegal),
security_request=1 (SMP Security Request on connect).
"""

@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault: what (kind), on which request (op, nth), and its argument."""

    kind: str
    op: int
    nth: int = 1
    arg: int | None = None

    @classmethod
    def parse(cls, kind: str, text: str) -> Fault:
        trigger, _, arg_text = text.partition("/")
        name, _, nth_text = trigger.partition("#")
        name = name.strip().lower()
        if name in REQUEST_NAMES:
            op = REQUEST_NAMES[name]
        else:
            try:
                op = int(name, 16)
            except ValueError:
                raise ValueError(
                    f"fault_{kind}: unknown request {name!r} (known: {', '.join(REQUEST_NAMES)} or a hex opcode)"
                ) from None
            if op not in REQUEST_OPCODE_NAMES:
                raise ValueError(f"fault_{kind}: 0x{op:02x} is not an ATT request opcode")
        try:
            nth = int(nth_text) if nth_text else 1
            arg = int(arg_text, 0) if arg_text else None
        except ValueError:
            raise ValueError(f"fault_{kind}={text!r}: expected REQUEST[#N][/NUMBER]") from None
        if nth < 1:
            raise ValueError(f"fault_{kind}: #N counts from 1")
        return cls(kind, op, nth, arg)

    @property
    def request(self) -> str:
        return REQUEST_OPCODE_NAMES[self.op]

