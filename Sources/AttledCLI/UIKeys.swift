import Attled
import AttledLED

/// What `attled ui`'s keys do to its state.
extension UIModel {
    /// Keys typed (or, with `ended`, the end of input: quit); then what they
    /// changed is written.
    func input(_ keys: [Key], ended: Bool = false) {
        if ended { quit() } else { for k in keys { handle(k) } }
        flushWrites()
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
}
