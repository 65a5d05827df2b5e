"""The HCI commands of one run and those on its critical path, from a btsnoop capture.

Reads a btsnoop v1 capture with datalink 1002 (H4: the HCI packet type byte
first), as `attled --btsnoop FILE` and Bumble's BUMBLE_SNOOPER=btsnoop:file:F
write it, and finds every HCI command the host sent, its round trip (sent until
the Command Complete or Command Status naming its opcode) and whether it was on
the critical path.

Definition. A command is OFF the critical path when, for its whole round trip,
the job was also waiting on the air, that is, at every instant of it at least
one of these held:
  - scan: a scan was enabled (LE Set [Extended] Scan Enable with Enable=1 had
    its Command Complete with status 0, and no Enable=0 had been sent since)
    and the advertising report of a target had not arrived yet. The targets are
    the peers of the successful LE (Enhanced) Connection Complete events (the
    Peer_Address, and the Peer_Resolvable_Private_Address when it is set); with
    several links (multi-lamp runs) the scan waits until the first report of
    every target has arrived ("per lamp"). A capture with no successful
    connection has no known target: its scans wait for as long as they are on;
  - connect: an LE [Extended] Create Connection was pending (its Command Status
    with status 0 received, no LE (Enhanced) Connection Complete yet);
  - att: an ATT request was outstanding on some link (the host's ACL data on
    CID 4 with the opcode of a request, until the ACL data from the controller
    on that link carrying its response or an Error Response, or the link's
    Disconnection Complete).
One refinement: a gap between two such waits inside the round trip also
counts as waiting on the air when it ends, before the command's answer, with
the host sending an ATT request (the next wait): the host went on with the job
while the command was outstanding (it was turning an ATT response into its
next request, not waiting for the controller). Without it a command sent
alongside a run of ATT transactions would count as critical because of the
host's sub-millisecond turnarounds between them, however little it delayed.
Every other command is ON the critical path: the job was waiting for the
controller. A command that never got its Command Complete/Status counts as on
the critical path ("unanswered"; its round trip is unknown and adds nothing to
the critical-path time). The critical-path time is the sum of the round trips
of the critical-path commands, in ms (overlapping round trips would each count;
attled sends one command at a time).

Command, addresses and reports are read from the HCI packets only: advertising
reports are the LE Advertising Report (0x02), LE Directed Advertising Report
(0x0B) and LE Extended Advertising Report (0x0D) subevents; ACL data from the
controller is reassembled (start and continuation fragments) before its ATT
opcode is read, and host ACL data is read from its start fragment.

    .venv/bin/python -m attledtools.bench.hcipath FILE.btsnoop...

prints each capture's commands, their round trips and what hid each one that
is off the critical path.
"""

from __future__ import annotations

import argparse
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bumble import hci
from bumble.att import ATT_CID
from bumble.att import Opcode as ATTOpcode

DATALINK_H4 = 1002
# pcap's LINKTYPE_BLUETOOTH_HCI_H4_WITH_PHDR: a 4-byte big-endian direction
# (0 host to controller, 1 controller to host), then the H4 packet. Root
# Canal's -enable_hci_sniffer writes it.
PCAP_H4_WITH_PHDR = 201

# The commands attled (and Bumble's host) send; any other prints as its hex opcode.
OPCODES = {
    hci.HCI_DISCONNECT_COMMAND: "Disconnect",
    hci.HCI_SET_EVENT_MASK_COMMAND: "Set Event Mask",
    hci.HCI_RESET_COMMAND: "Reset",
    hci.HCI_SET_EVENT_MASK_PAGE_2_COMMAND: "Set Event Mask Page 2",
    hci.HCI_WRITE_LE_HOST_SUPPORT_COMMAND: "Write LE Host Support",
    hci.HCI_READ_LOCAL_VERSION_INFORMATION_COMMAND: "Read Local Version",
    hci.HCI_READ_LOCAL_SUPPORTED_COMMANDS_COMMAND: "Read Local Supported Commands",
    hci.HCI_READ_LOCAL_SUPPORTED_FEATURES_COMMAND: "Read Local Supported Features",
    hci.HCI_READ_LOCAL_EXTENDED_FEATURES_COMMAND: "Read Local Extended Features",
    hci.HCI_READ_BUFFER_SIZE_COMMAND: "Read Buffer Size",
    hci.HCI_READ_BD_ADDR_COMMAND: "Read BD_ADDR",
    hci.HCI_LE_SET_EVENT_MASK_COMMAND: "LE Set Event Mask",
    hci.HCI_LE_READ_BUFFER_SIZE_COMMAND: "LE Read Buffer Size",
    hci.HCI_LE_READ_LOCAL_SUPPORTED_FEATURES_COMMAND: "LE Read Local Supported Features",
    hci.HCI_LE_SET_RANDOM_ADDRESS_COMMAND: "LE Set Random Address",
    hci.HCI_LE_SET_SCAN_PARAMETERS_COMMAND: "LE Set Scan Parameters",
    hci.HCI_LE_SET_SCAN_ENABLE_COMMAND: "LE Set Scan Enable",
    hci.HCI_LE_CREATE_CONNECTION_COMMAND: "LE Create Connection",
    hci.HCI_LE_CREATE_CONNECTION_CANCEL_COMMAND: "LE Create Connection Cancel",
    hci.HCI_LE_READ_FILTER_ACCEPT_LIST_SIZE_COMMAND: "LE Read Filter Accept List Size",
    hci.HCI_LE_CLEAR_FILTER_ACCEPT_LIST_COMMAND: "LE Clear Filter Accept List",
    hci.HCI_LE_ADD_DEVICE_TO_FILTER_ACCEPT_LIST_COMMAND: "LE Add Device To Filter Accept List",
    hci.HCI_LE_CONNECTION_UPDATE_COMMAND: "LE Connection Update",
    hci.HCI_LE_READ_SUPPORTED_STATES_COMMAND: "LE Read Supported States",
    hci.HCI_LE_SET_DATA_LENGTH_COMMAND: "LE Set Data Length",
    hci.HCI_LE_READ_SUGGESTED_DEFAULT_DATA_LENGTH_COMMAND: "LE Read Suggested Default Data Length",
    hci.HCI_LE_WRITE_SUGGESTED_DEFAULT_DATA_LENGTH_COMMAND: "LE Write Suggested Default Data Length",
    hci.HCI_LE_READ_MAXIMUM_DATA_LENGTH_COMMAND: "LE Read Maximum Data Length",
    hci.HCI_LE_READ_PHY_COMMAND: "LE Read PHY",
    hci.HCI_LE_SET_DEFAULT_PHY_COMMAND: "LE Set Default PHY",
    hci.HCI_LE_SET_PHY_COMMAND: "LE Set PHY",
    hci.HCI_LE_SET_EXTENDED_ADVERTISING_PARAMETERS_COMMAND: "LE Set Extended Advertising Parameters",
    hci.HCI_LE_READ_MAXIMUM_ADVERTISING_DATA_LENGTH_COMMAND: "LE Read Maximum Advertising Data Length",
    hci.HCI_LE_READ_NUMBER_OF_SUPPORTED_ADVERTISING_SETS_COMMAND: "LE Read Number of Supported Advertising Sets",
    hci.HCI_LE_SET_EXTENDED_SCAN_PARAMETERS_COMMAND: "LE Set Extended Scan Parameters",
    hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND: "LE Set Extended Scan Enable",
    hci.HCI_LE_EXTENDED_CREATE_CONNECTION_COMMAND: "LE Extended Create Connection",
    hci.HCI_LE_SET_PRIVACY_MODE_COMMAND: "LE Set Privacy Mode",
    hci.HCI_LE_READ_BUFFER_SIZE_V2_COMMAND: "LE Read Buffer Size v2",
}

SCAN_ENABLE = (hci.HCI_LE_SET_SCAN_ENABLE_COMMAND, hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND)
CREATE_CONNECTION = (hci.HCI_LE_CREATE_CONNECTION_COMMAND, hci.HCI_LE_EXTENDED_CREATE_CONNECTION_COMMAND)
# The LE meta subevents read: advertising reports (legacy, directed, extended) and connections.
REPORTS = (hci.HCI_LE_ADVERTISING_REPORT_EVENT, hci.HCI_LE_DIRECTED_ADVERTISING_REPORT_EVENT,
           hci.HCI_LE_EXTENDED_ADVERTISING_REPORT_EVENT)
CONNECTION_COMPLETE = (hci.HCI_LE_CONNECTION_COMPLETE_EVENT, hci.HCI_LE_ENHANCED_CONNECTION_COMPLETE_EVENT)

# ATT requests (a response or an Error Response answers each); the response's
# opcode is the request's + 1. Write Command / Signed Write Command need none.
ATT_REQUESTS = frozenset({
    ATTOpcode.ATT_EXCHANGE_MTU_REQUEST, ATTOpcode.ATT_FIND_INFORMATION_REQUEST,
    ATTOpcode.ATT_FIND_BY_TYPE_VALUE_REQUEST, ATTOpcode.ATT_READ_BY_TYPE_REQUEST, ATTOpcode.ATT_READ_REQUEST,
    ATTOpcode.ATT_READ_BLOB_REQUEST, ATTOpcode.ATT_READ_MULTIPLE_REQUEST, ATTOpcode.ATT_READ_BY_GROUP_TYPE_REQUEST,
    ATTOpcode.ATT_WRITE_REQUEST, ATTOpcode.ATT_PREPARE_WRITE_REQUEST, ATTOpcode.ATT_EXECUTE_WRITE_REQUEST,
    ATTOpcode.ATT_READ_MULTIPLE_VARIABLE_REQUEST})
ATT_COMMANDS = frozenset({ATTOpcode.ATT_WRITE_COMMAND, ATTOpcode.ATT_SIGNED_WRITE_COMMAND})
ATT_ERROR_RESPONSE = ATTOpcode.ATT_ERROR_RESPONSE


def opcode_name(opcode: int) -> str:
    return OPCODES.get(opcode, f"0x{opcode:04x}")


@dataclass(frozen=True)
class Packet:
    t: float  # seconds since the capture's first record
    sent: bool  # host to controller
    data: bytes  # H4: the packet type byte, then the HCI packet


def read_btsnoop(path: Path | str) -> list[Packet]:
    """The records of a btsnoop v1 H4 capture; ValueError when it is not one
    (OSError when it cannot be read). A record cut short at the end is dropped."""
    b = Path(path).read_bytes()
    if b[:8] != b"btsnoop\0" or len(b) < 16:
        raise ValueError(f"{path}: not a btsnoop file")
    version, datalink = struct.unpack(">II", b[8:16])
    if version != 1 or datalink != DATALINK_H4:
        raise ValueError(f"{path}: btsnoop version {version}, datalink {datalink}; want 1, {DATALINK_H4} (H4)")
    packets: list[Packet] = []
    off, t0 = 16, None
    while off + 24 <= len(b):
        _, incl, flags, _, ts = struct.unpack(">IIIIQ", b[off:off + 24])
        d = b[off + 24:off + 24 + incl]
        off += 24 + incl
        if len(d) < incl or not d:
            break
        t0 = ts if t0 is None else t0
        packets.append(Packet((ts - t0) / 1e6, not flags & 1, d))
    return packets


def read_pcap(path: Path | str) -> list[Packet]:
    """The records of a pcap capture with link type 201 (H4 with a direction
    header), as Root Canal's sniffer writes it; ValueError when it is not one."""
    b = Path(path).read_bytes()
    if len(b) < 24:
        raise ValueError(f"{path}: not a pcap file")
    magic = b[:4]
    if magic == b"\xd4\xc3\xb2\xa1":
        end, scale = "<", 1e6
    elif magic == b"\xa1\xb2\xc3\xd4":
        end, scale = ">", 1e6
    elif magic == b"\x4d\x3c\xb2\xa1":
        end, scale = "<", 1e9
    elif magic == b"\xa1\xb2\x3c\x4d":
        end, scale = ">", 1e9
    else:
        raise ValueError(f"{path}: not a pcap file")
    (linktype,) = struct.unpack(end + "I", b[20:24])
    if linktype != PCAP_H4_WITH_PHDR:
        raise ValueError(f"{path}: pcap link type {linktype}; want {PCAP_H4_WITH_PHDR} (H4 with direction)")
    packets: list[Packet] = []
    off, t0 = 24, None
    while off + 16 <= len(b):
        sec, frac, incl, _ = struct.unpack(end + "IIII", b[off:off + 16])
        d = b[off + 16:off + 16 + incl]
        off += 16 + incl
        if len(d) < incl or len(d) < 5:
            break
        t = sec + frac / scale
        t0 = t if t0 is None else t0
        (direction,) = struct.unpack(">I", d[:4])
        packets.append(Packet(t - t0, direction == 0, d[4:]))
    return packets


def read_capture(path: Path | str) -> list[Packet]:
    """A btsnoop (attled's, Bumble's) or pcap (Root Canal's) capture."""
    with open(path, "rb") as f:
        head = f.read(8)
    return read_btsnoop(path) if head == b"btsnoop\0" else read_pcap(path)


def att_counts(path: Path) -> tuple[int, int]:
    """(requests, commands) the host sent on the ATT channel; (-1, -1) when the
    capture is missing or unreadable."""
    try:
        packets = read_btsnoop(path)
    except (OSError, ValueError):
        return (-1, -1)
    req = cmd = 0
    for p in packets:
        d = p.data
        if not p.sent or len(d) < 10 or d[0] != hci.HCI_ACL_DATA_PACKET:
            continue
        if (d[1] | d[2] << 8) >> 12 & 0x3 == hci.HCI_ACL_PB_CONTINUATION:
            continue
        if d[7] | d[8] << 8 == ATT_CID:
            req += d[9] in ATT_REQUESTS
            cmd += d[9] in ATT_COMMANDS
    return (req, cmd)


@dataclass
class Command:
    opcode: int
    sent: float
    done: float | None = None  # its Command Complete / Command Status; None: never answered
    status: int | None = None
    params: bytes = b""
    critical: bool = True
    hidden_by: str = ""  # off the critical path: the waits that covered it ("scan", "connect", "att")

    @property
    def name(self) -> str:
        return opcode_name(self.opcode)

    @property
    def ms(self) -> float:
        return (self.done - self.sent) * 1000 if self.done is not None else float("nan")


@dataclass
class HciPath:
    """One run's commands, in the order sent, each marked on or off the critical path."""
    commands: list[Command] = field(default_factory=list)
    waits: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, kind), time on the air
    duration: float = 0.0  # s, first to last record

    @property
    def sent(self) -> int:
        return len(self.commands)

    @property
    def critical(self) -> int:
        return sum(c.critical for c in self.commands)

    @property
    def unanswered(self) -> int:
        return sum(c.done is None for c in self.commands)

    @property
    def critical_ms(self) -> float:
        return sum(c.ms for c in self.commands if c.critical and c.done is not None)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.commands]

    def lines(self) -> list[str]:
        """One line per command: '*' when on the critical path, its round trip, what hid it."""
        out = []
        for c in self.commands:
            rt = f"{c.ms:7.1f} ms" if c.done is not None else "   no answer"
            why = f"  (waiting: {c.hidden_by})" if not c.critical else ""
            st = f" status 0x{c.status:02x}" if c.status else ""
            out.append(f"{'*' if c.critical else ' '} {c.sent * 1000:8.1f} {c.name:<40} {rt}{st}{why}")
        return out

    def summary(self) -> dict:
        return {"sent": self.sent, "critical": self.critical, "critical_ms": round(self.critical_ms, 2),
                "unanswered": self.unanswered, "commands": self.names,
                "critical_commands": [c.name for c in self.commands if c.critical]}


def _report_addresses(sub: int, p: bytes) -> list[bytes]:
    """The advertiser addresses of an LE advertising report subevent's parameters (after the subevent code)."""
    out: list[bytes] = []
    if not p:
        return out
    n, i = p[0], 1
    for _ in range(n):
        if sub == hci.HCI_LE_ADVERTISING_REPORT_EVENT:
            # event type, address type, address, data length, data, rssi
            if i + 9 > len(p):
                break
            out.append(p[i + 2:i + 8])
            i += 9 + p[i + 8] + 1
        elif sub == hci.HCI_LE_EXTENDED_ADVERTISING_REPORT_EVENT:
            # event type(2), address type, address, phys, sid, tx power, rssi, interval(2), direct(7), length
            if i + 24 > len(p):
                break
            out.append(p[i + 3:i + 9])
            i += 24 + p[i + 23]
        elif sub == hci.HCI_LE_DIRECTED_ADVERTISING_REPORT_EVENT:
            # event type, address type, address, direct address type, direct address, rssi
            if i + 16 > len(p):
                break
            out.append(p[i + 2:i + 8])
            i += 16
    return out


def _union(spans: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Merged spans (touching or overlapping ones joined; their kinds listed)."""
    merged: list[list] = []
    for s, e, k in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
            if k not in merged[-1][2]:
                merged[-1][2].append(k)
        else:
            merged.append([s, e, [k]])
    return [(s, e, "+".join(k)) for s, e, k in merged]


def analyse(packets: list[Packet]) -> HciPath:
    """The commands of a capture and the critical path (see the module's docstring)."""
    path = HciPath(duration=packets[-1].t if packets else 0.0)
    end = path.duration
    outstanding: dict[int, list[Command]] = {}
    reports: list[tuple[float, bytes]] = []  # (t, advertiser address)
    scan_on: list[tuple[float, float]] = []
    scan_since: float | None = None
    connect: list[tuple[float, float]] = []
    connect_since: float | None = None
    targets: set[bytes] = set()
    att: list[tuple[float, float]] = []
    att_since: dict[int, tuple[float, int]] = {}  # handle -> (sent, request opcode)
    rx: dict[int, tuple[bytearray, int]] = {}  # handle -> (ACL payload so far, L2CAP length + 4)

    def att_done(handle: int, t: float) -> None:
        since = att_since.pop(handle, None)
        if since is not None:
            att.append((since[0], t))

    for pk in packets:
        d, t = pk.data, pk.t
        kind = d[0]
        if kind == hci.HCI_COMMAND_PACKET and pk.sent and len(d) >= 4:
            c = Command(d[1] | d[2] << 8, t, params=d[4:])
            path.commands.append(c)
            outstanding.setdefault(c.opcode, []).append(c)
            if c.opcode in SCAN_ENABLE and c.params[:1] == b"\x00" and scan_since is not None:
                scan_on.append((scan_since, t))
                scan_since = None
        elif kind == hci.HCI_EVENT_PACKET and not pk.sent and len(d) >= 3:
            code, p = d[1], d[3:]
            complete = code == hci.HCI_COMMAND_COMPLETE_EVENT
            if (complete or code == hci.HCI_COMMAND_STATUS_EVENT) and len(p) >= 3:
                opcode = p[1] | p[2] << 8 if complete else (p[2] | p[3] << 8 if len(p) >= 4 else 0)
                status = (p[3] if len(p) > 3 else None) if complete else p[0]
                waiting = outstanding.get(opcode)
                if waiting:
                    c = waiting.pop(0)
                    c.done, c.status = t, status
                    if c.opcode in SCAN_ENABLE and c.params[:1] == b"\x01" and status == 0 and scan_since is None:
                        scan_since = t
                    if c.opcode in CREATE_CONNECTION and status == 0 and connect_since is None:
                        connect_since = t
            elif code == hci.HCI_LE_META_EVENT and p:
                sub, q = p[0], p[1:]
                if sub in REPORTS:
                    reports.extend((t, a) for a in _report_addresses(sub, q))
                elif sub in CONNECTION_COMPLETE and len(q) >= 11:
                    if connect_since is not None:
                        connect.append((connect_since, t))
                        connect_since = None
                    if q[0] == 0:
                        targets.add(q[5:11])
                        if sub == hci.HCI_LE_ENHANCED_CONNECTION_COMPLETE_EVENT and len(q) >= 23 and any(q[17:23]):
                            targets.add(q[17:23])
            elif code == hci.HCI_DISCONNECTION_COMPLETE_EVENT and len(p) >= 3:
                att_done(p[1] | (p[2] & 0x0F) << 8, t)
        elif kind == hci.HCI_ACL_DATA_PACKET and len(d) >= 5:
            hf = d[1] | d[2] << 8
            handle, pb = hf & 0x0FFF, hf >> 12 & 0x3
            payload = d[5:]
            if pk.sent:
                if (pb != hci.HCI_ACL_PB_CONTINUATION and len(payload) >= 5 and payload[2] | payload[3] << 8 == ATT_CID
                        and payload[4] in ATT_REQUESTS):
                    att_since.setdefault(handle, (t, payload[4]))
                continue
            if pb == hci.HCI_ACL_PB_CONTINUATION:
                if handle not in rx:
                    continue
                rx[handle][0].extend(payload)
            elif len(payload) >= 4:
                rx[handle] = (bytearray(payload), (payload[0] | payload[1] << 8) + 4)
            else:
                continue
            buf, want = rx[handle]
            if len(buf) < want:
                continue
            del rx[handle]
            if buf[2] | buf[3] << 8 == ATT_CID and len(buf) >= 5 and handle in att_since:
                op = buf[4]
                if op == att_since[handle][1] + 1 or op == ATT_ERROR_RESPONSE:
                    att_done(handle, t)
    # Spans still open at the end of the capture.
    if scan_since is not None:
        scan_on.append((scan_since, end))
    if connect_since is not None:
        connect.append((connect_since, end))
    att.extend((s, end) for s, _ in att_since.values())

    # Scanning waits on the air until the first report of every target (per lamp).
    first: dict[bytes, float] = {}
    for t, a in reports:
        if a in targets and a not in first:
            first[a] = t
    if targets:
        # A target never reported (e.g. connected by address) does not hold the scan open.
        found = max(first.values()) if first else None
        scan = [(s, min(e, found)) for s, e in scan_on if found is not None and s < found]
    else:
        scan = list(scan_on)
    spans = ([(s, e, "scan") for s, e in scan] + [(s, e, "connect") for s, e in connect]
             + [(s, e, "att") for s, e in att])
    path.waits = _union([x for x in spans if x[1] > x[0]])
    att_starts = {s for s, _ in att}
    for c in path.commands:
        hidden = _hidden_by(c, path.waits, att_starts)
        if hidden is not None:
            c.critical, c.hidden_by = False, hidden
    return path


def _hidden_by(c: Command, waits: list[tuple[float, float, str]], att_starts: set[float]) -> str | None:
    """What covered c's whole round trip (the waits' kinds, "+host" when a gap between
    them was bridged by the host's own next ATT request), or None: c was on the critical path."""
    if c.done is None:
        return None
    t, kinds = c.sent, []
    for s, e, k in waits:
        if e < t:
            continue
        if s > t:  # a gap in the waits from t to s
            if s >= c.done or s not in att_starts:
                return None
            kinds.append("host")
        kinds.extend(k.split("+"))
        t = max(t, e)
        if t >= c.done:
            return "+".join(dict.fromkeys(kinds))
    return None


def analyse_file(path: Path | str) -> HciPath:
    return analyse(read_capture(path))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+", type=Path, help="btsnoop (H4) or pcap (H4 with direction, Root Canal's) files")
    args = ap.parse_args(argv)
    rc = 0
    for f in args.captures:
        try:
            hp = analyse_file(f)
        except (OSError, ValueError) as e:
            print(f"hcipath: {e}", file=sys.stderr)
            rc = 1
            continue
        print(f"{f}: {hp.sent} HCI commands, {hp.critical} on the critical path ({hp.critical_ms:.1f} ms),"
              f" {hp.unanswered} unanswered; capture {hp.duration * 1000:.1f} ms")
        print(f"  {'':1} {'sent ms':>8} {'command':<40} {'round trip':>10}   (* = on the critical path)")
        for line in hp.lines():
            print("  " + line)
        for s, e, k in hp.waits:
            print(f"  waiting on the air {s * 1000:8.1f}-{e * 1000:8.1f} ms: {k}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
