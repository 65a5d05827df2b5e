#if canImport(Glibc)
import Attled
import Glibc
#endif
import Synchronization
import BLETransport

/// A key press, decoded from the terminal's byte stream.
enum Key: Equatable {
    case char(Character)
    case tab, backTab, enter, escape, backspace
    case up, down, left, right, pageUp, pageDown, home, end
    case ctrlC
}

/// Raw terminal mode, the alternate screen, and stdin watched on the event
/// loop: typed bytes are collected the moment they arrive.
final class Terminal {
    private var saved = termios()
    private var active = false
    let input = InputQueue()
    private var loop: EventLoop?
    private var stdinWatch: EventLoop.Token?
    /// Called on the loop when keys arrived or stdin closed.
    var onInput: (() -> Void)?

    /// Bytes typed since the last `take()`; `eof` once stdin closed.
    final class InputQueue: Sendable {
        let bytes = Mutex<[UInt8]>([])
        let eof = Atomic<Bool>(false)
        func take() -> [UInt8] { bytes.withLock { b in defer { b.removeAll() }; return b } }
        var isEmpty: Bool { bytes.withLock { $0.isEmpty } }
    }

    /// Enters raw mode and the alternate screen, and watches stdin on `loop`;
    /// false if stdin/stdout is not a terminal.
    func enter(loop: EventLoop) -> Bool {
        guard isatty(0) == 1, isatty(1) == 1, tcgetattr(0, &saved) == 0 else { return false }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
        raw.c_iflag &= ~tcflag_t(IXON | ICRNL | INLCR)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in cc[Int(VMIN)] = 1; cc[Int(VTIME)] = 0 }
        guard tcsetattr(0, TCSANOW, &raw) == 0 else { return false }
        active = true
        write("\u{1b}[?1049h\u{1b}[?25l\u{1b}[H\u{1b}[2J")
        self.loop = loop
        stdinWatch = loop.watch(0, .readable) { [weak self] _ in self?.readInput() }
        return true
    }

    /// Restores the terminal exactly as it was. Safe to call more than once.
    func leave() {
        guard active else { return }
        active = false
        if let t = stdinWatch { loop?.cancel(t) }
        stdinWatch = nil
        write("\u{1b}[0m\u{1b}[?25h\u{1b}[?1049l")
        tcsetattr(0, TCSANOW, &saved)
    }

    func write(_ s: String) { Console.write(1, s) }

    /// Columns and rows (80x24 if unknown).
    func size() -> (cols: Int, rows: Int) {
        var ws = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 { return (Int(ws.ws_col), Int(ws.ws_row)) }
        return (80, 24)
    }

    /// stdin is readable: what is there (a read of a readable terminal does
    /// not block); end of input stops the watch.
    private func readInput() {
        var buf = [UInt8](repeating: 0, count: 256)
        let n = buf.withUnsafeMutableBytes { read(0, $0.baseAddress!, $0.count) }
        if n < 0 && (errno == EINTR || errno == EAGAIN) { return }
        if n <= 0 {
            input.eof.store(true, ordering: .relaxed)
            if let t = stdinWatch { loop?.cancel(t) }
            stdinWatch = nil
            onInput?()
            return
        }
        input.bytes.withLock { $0 += buf[0..<n] }
        onInput?()
    }

    /// Splits input bytes into keys. Incomplete escape sequences at the end are
    /// treated as a bare Escape (terminals send sequences whole).
    static func keys(_ b: [UInt8]) -> [Key] {
        var out: [Key] = []
        var i = 0
        func at(_ k: Int) -> UInt8? { i + k < b.count ? b[i + k] : nil }
        while i < b.count {
            let c = b[i]
            if c == 0x1B {
                if at(1) == 0x5B || at(1) == 0x4F { // CSI or SS3
                    var j = i + 2
                    var params: [UInt8] = []
                    while j < b.count, (0x30...0x3F).contains(b[j]) { params.append(b[j]); j += 1 }
                    guard j < b.count else { out.append(.escape); i = b.count; break }
                    let final = b[j]
                    let p = String(decoding: params, as: UTF8.self)
                    switch (final, p) {
                    case (0x41, _): out.append(.up)
                    case (0x42, _): out.append(.down)
                    case (0x43, _): out.append(.right)
                    case (0x44, _): out.append(.left)
                    case (0x48, _): out.append(.home)
                    case (0x46, _): out.append(.end)
                    case (0x5A, _): out.append(.backTab)
                    case (0x7E, "5"): out.append(.pageUp)
                    case (0x7E, "6"): out.append(.pageDown)
                    case (0x7E, "1"), (0x7E, "7"): out.append(.home)
                    case (0x7E, "4"), (0x7E, "8"): out.append(.end)
                    default: break
                    }
                    i = j + 1
                    continue
                }
                out.append(.escape); i += 1; continue
            }
            switch c {
            case 0x03: out.append(.ctrlC)
            case 0x09: out.append(.tab)
            case 0x0D, 0x0A: out.append(.enter)
            case 0x7F, 0x08: out.append(.backspace)
            default:
                if c >= 0x20 && c < 0x7F { out.append(.char(Character(Unicode.Scalar(c)))) }
            }
            i += 1
        }
        return out
    }
}
