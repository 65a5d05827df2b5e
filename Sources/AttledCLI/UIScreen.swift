import Attled
import AttledLED

/// The UI's keys and screen.
extension UIApp {
    func handleInput() {
        if term.input.eof.load(ordering: .relaxed) && term.input.isEmpty { quit(); return }
        for k in Terminal.keys(term.input.take()) { handle(k) }
    }

    func handle(_ k: Key) {
        switch k {
        case .char("q"), .char("Q"), .ctrlC: quit(); return
        default: break
        }
        if isHarness {
            if case let .char(c) = k, c == "1" || c == "2" {
                let i = c == "1" ? 0 : 1
                lastKey[i] = Instant.now()
                if !pressed[i] && enabled, let b = HarnessButton(rawValue: i + 1) {
                    pressed[i] = true
                    commandQueue.append([b.pressByte])
                    scheduleRelease(i)
                }
            }
            return
        }
        switch k {
        case .tab, .down: selected = (selected + 1) % 3; typed = ""
        case .backTab, .up: selected = (selected + 2) % 3; typed = ""
        case .char("r"): selected = 0; typed = ""
        case .char("g"): selected = 1; typed = ""
        case .char("b"): selected = 2; typed = ""
        case .left: set(desired[selected] - 1)
        case .right: set(desired[selected] + 1)
        case .pageDown: set(desired[selected] - 16)
        case .pageUp: set(desired[selected] + 16)
        case .home: set(0)
        case .end: set(255)
        case let .char(c) where c.isNumber:
            typed.append(c)
            if typed.count == 3 { commitTyped() }
        case .enter: commitTyped()
        case .backspace: if !typed.isEmpty { typed.removeLast() }
        case .escape: typed = ""
        default: break
        }
    }

    func set(_ v: Int) {
        guard enabled else { return }
        desired[selected] = max(0, min(255, v))
    }

    func commitTyped() {
        if let v = Int(typed) { set(v) }
        typed = ""
    }

    // MARK: drawing

    func draw() {
        let (cols, rows) = term.size()
        let width = max(8, min(64, cols - 28))
        var lines: [String] = []
        lines.append("\u{1b}[1m attled ui\u{1b}[0m  \(transportName)")
        lines.append(" Device  \(deviceLine)")
        var st = " State   \(state.rawValue)"
        if let c = link?.connection, c.isConnected { st += ", interval \(formatMs(us: c.intervalMicroseconds, decimals: 2)) ms" }
        st += ", profile \(profileName)"
        lines.append(st)
        lines.append("")
        if isHarness {
            for i in 0..<2 {
                let label = pressed[i] ? "\u{1b}[7m PRESSED  \u{1b}[0m" : "[ released ]"
                lines.append("   \(names[i])  \(label)   key \(i + 1)")
            }
            lines.append("")
            lines.append("   Notifications: " + (notifications.isEmpty ? "(none yet)" : notifications.joined(separator: " ")))
        } else {
            let colours = ["31", "32", "34"]
            for i in 0..<3 {
                let mark = i == selected ? ">" : " "
                let filled = enabled ? desired[i] * width / 255 : 0
                let bar: String
                if enabled {
                    bar = "\u{1b}[\(colours[i])m" + String(repeating: "█", count: filled) + "\u{1b}[0m" + String(repeating: "░", count: width - filled)
                } else {
                    bar = "\u{1b}[2m" + String(repeating: "·", count: width) + "\u{1b}[0m"
                }
                let value = enabled ? String(desired[i]) : "--"
                let label = names[i] + String(repeating: " ", count: 6 - names[i].count)
                lines.append(" \(mark) \(label) [\(bar)] \(String(repeating: " ", count: max(0, 3 - value.count)))\(value)" + (enabled ? "" : "  disabled"))
            }
            lines.append("")
            let (r, g, b) = (desired[0], desired[1], desired[2])
            lines.append("   Colour [\u{1b}[48;2;\(r);\(g);\(b)m        \u{1b}[0m]  " + RGB(UInt8(r), UInt8(g), UInt8(b)).hex + (typed.isEmpty ? "" : "   typing: \(typed)"))
        }
        lines.append("")
        lines.append(" Status: \(status)")
        lines.append(isHarness ? " 1/2 press a button (released after a short hold)   q quit"
                               : " Tab/r/g/b select  ←/→ ±1  PgUp/PgDn ±16  Home/End 0/255  0-9 type  q quit")
        var out = "\u{1b}[H"
        for (i, l) in lines.prefix(rows).enumerated() {
            out += l + "\u{1b}[K" + (i < min(lines.count, rows) - 1 ? "\r\n" : "")
        }
        out += "\u{1b}[J"
        term.write(out)
    }
}
