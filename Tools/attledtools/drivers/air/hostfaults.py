"""Controller faults (--host-fault, and the stdin "fault" command): their syntax
and help text; the host controllers apply them (controller.py)."""

from __future__ import annotations

HOST_FAULT_HELP = """\
Controller faults (--host-fault FAULT, repeatable; every host controller, or
only host I with I@FAULT).  OPCODE is the HCI opcode in hex (0x200d LE Create
Connection, 0x200c LE Set Scan Enable, 0x2042 LE Set Extended Scan Enable,
0x0406 Disconnect ...); #N applies the fault to the N-th such command only
(default: every one).
  reject=OPCODE[:STATUS][#N]    answer with error STATUS (default 0x0c Command
                                Disallowed): Command Status for a command
                                normally answered so, else Command Complete
                                whose only parameter is the status
  swallow=OPCODE[#N]            never answer the command (no event at all)
  hw_error=OPCODE[:CODE][#N]    answer the command normally, then send a
                                Hardware Error event (code default 0x01)
Each fault applied is reported as {"event":"host_fault","host":I,"fault":..,
"opcode":..,...}.
"""

class HostFault:
    """One --host-fault: kind, opcode, argument (status / code), occurrence, host."""

    KINDS = ("reject", "swallow", "hw_error")

    def __init__(self, text: str):
        self.text = text
        host_text, at, rest = text.partition("@")
        if not at:
            host_text, rest = "", text
        self.host = int(host_text) if host_text else None
        kind, eq, value = rest.partition("=")
        if not eq or kind not in self.KINDS:
            raise ValueError(f"host fault {text!r}: expected [I@]reject|swallow|hw_error=OPCODE[:ARG][#N]")
        self.kind = kind
        value, _, nth = value.partition("#")
        opcode, _, arg = value.partition(":")
        try:
            self.opcode = int(opcode, 16)
            self.arg = int(arg, 16) if arg else (0x0C if kind == "reject" else 0x01)
            self.nth = int(nth) if nth else None
        except ValueError:
            raise ValueError(f"host fault {text!r}: OPCODE and ARG are hex, #N a number") from None
        if kind == "swallow" and arg:
            raise ValueError(f"host fault {text!r}: swallow takes no argument")
        if not 0 <= self.opcode <= 0xFFFF or not 0 <= self.arg <= 0xFF:
            raise ValueError(f"host fault {text!r}: opcode or argument out of range")

    def applies(self, host: int, opcode: int, count: int) -> bool:
        return (self.host is None or self.host == host) and self.opcode == opcode and self.nth in (None, count)
