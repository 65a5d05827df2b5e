import Attled
import AttledLED

/// `attled ui`'s screen: the model drawn in one write.
extension UIApp {
    func draw() {
        let (cols, rows) = term.size()
        term.write(model.screen(cols: cols, rows: rows))
        // A backoff's countdown is redrawn every 250 ms until the next attempt.
        if case let .disconnected(ms?) = model.state, !redrawPending {
            redrawPending = true
            loop.schedule(afterMs: min(ms, 250)) { [weak self] in
                self?.redrawPending = false
                self?.draw()
            }
        }
    }
}

extension UIModel {
    /// The whole screen for a terminal of `cols` x `rows`: cursor home, each
    /// line cleared to its end, the rest of the screen cleared.
    func screen(cols: Int, rows: Int) -> String {
        let m = self
        let width = max(8, min(64, cols - 28))
        var lines: [String] = []
        lines.append("\u{1b}[1m attled ui\u{1b}[0m  \(m.transportName)")
        lines.append(" Device  \(m.deviceLine)")
        lines.append(" State   \(m.stateLine)")
        lines.append("")
        if m.isHarness {
            for i in 0..<2 {
                let label = m.pressed[i] ? "\u{1b}[7m PRESSED  \u{1b}[0m" : "[ released ]"
                lines.append("   \(m.names[i])  \(label)   key \(i + 1)")
            }
            lines.append("")
            lines.append("   Notifications: " + (m.notifications.isEmpty ? "(none yet)" : m.notifications.joined(separator: " ")))
        } else {
            let colours = ["31", "32", "34"]
            for i in 0..<3 {
                let mark = i == m.selected ? ">" : " "
                let filled = m.enabled ? m.desired[i] * width / 255 : 0
                let bar: String
                if m.enabled {
                    bar = "\u{1b}[\(colours[i])m" + String(repeating: "█", count: filled) + "\u{1b}[0m" + String(repeating: "░", count: width - filled)
                } else {
                    bar = "\u{1b}[2m" + String(repeating: "·", count: width) + "\u{1b}[0m"
                }
                let value = m.enabled ? String(m.desired[i]) : "--"
                let label = m.names[i] + String(repeating: " ", count: 6 - m.names[i].count)
                lines.append(" \(mark) \(label) [\(bar)] \(String(repeating: " ", count: max(0, 3 - value.count)))\(value)" + (m.enabled ? "" : "  disabled"))
            }
            lines.append("")
            let (r, g, b) = (m.desired[0], m.desired[1], m.desired[2])
            lines.append("   Colour [\u{1b}[48;2;\(r);\(g);\(b)m        \u{1b}[0m]  " + RGB(UInt8(r), UInt8(g), UInt8(b)).hex + (m.typed.isEmpty ? "" : "   typing: \(m.typed)"))
        }
        lines.append("")
        lines.append(" Status: \(m.status)")
        lines.append(m.isHarness ? " 1/2 press a button (released after a short hold)   q quit"
                               : " Tab/r/g/b select  ←/→ ±1  PgUp/PgDn ±16  Home/End 0/255  0-9 type  q quit")
        var out = "\u{1b}[H"
        for (i, l) in lines.prefix(rows).enumerated() {
            out += l + "\u{1b}[K" + (i < min(lines.count, rows) - 1 ? "\r\n" : "")
        }
        out += "\u{1b}[J"
        return out
    }
}
