import Attled
import AttledLED

/// `attled ui`: the seed apps' colour sliders in a terminal. The state, the
/// keeper's events and the writes are `UIModel`'s (UIModel.swift, UIKeys.swift);
/// this is the terminal around it: raw mode, keys from stdin on the event
/// loop, a redraw after every change (UIScreen.swift).
final class UIApp {
    let model: UIModel
    let term = Terminal()
    /// A redraw is scheduled (the State line's countdown).
    var redrawPending = false

    init(model: UIModel) {
        self.model = model
        model.onChange = { [weak self] in self?.draw() }
    }

    /// The UI for a session's options and stack.
    convenience init(session s: Session) throws {
        guard let stack = s.stack else { throw RunError("no controller", .failure) }
        self.init(model: UIModel(
            stack: stack, resolver: s.makeResolver(explicitProfile: s.opts.explicitProfile, trustCache: s.opts.trustCache),
            filter: Target.from(s.opts)[0].filter, passive: s.opts.passive,
            connectTimeoutMs: s.opts.connectTimeoutMs ?? Session.defaultConnectMs, noAcceptList: s.opts.gateway.noAcceptList,
            reopen: { [unowned s] in try s.reopenStack() }, close: { [unowned s] _ in s.closeStack() }))
    }

    var loop: EventLoop { model.keeper.loop }

    /// Runs until q (or end of input), a signal, or a fatal error.
    /// - Throws: `RunError` (no terminal, no LED service), `HCIError.interrupted`.
    func run() throws {
        guard term.enter(loop: loop) else {
            throw RunError("attled ui needs a terminal (stdin and stdout must be a tty)", .usage)
        }
        defer {
            term.leave()
            loop.onResize = nil
        }
        loop.watchSignals(resize: true)
        loop.onResize = { [weak self] in self?.draw() }
        term.onInput = { [weak self] in
            guard let self else { return }
            self.handleInput()
            self.draw()
        }
        try model.run()
    }

    /// Keys typed, or the end of input (quit).
    func handleInput() {
        let ended = term.input.eof.load(ordering: .relaxed) && term.input.isEmpty
        model.input(ended ? [] : Terminal.keys(term.input.take()), ended: ended)
    }
}
