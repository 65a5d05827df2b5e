#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI

/// The event loop below HCI: descriptors, timers and a driver, on one thread.
@Suite("Event loop")
struct EventLoopTests {
    /// A pipe whose read end the loop watches.
    final class Pipe {
        var fds: [Int32] = [-1, -1]
        init() { _ = pipe(&fds) }
        deinit { close(fds[0]); close(fds[1]) }
        func write(_ b: UInt8) { var v = b; _ = Glibc.write(fds[1], &v, 1) }
        func read() -> UInt8? { var v: UInt8 = 0; return Glibc.read(fds[0], &v, 1) == 1 ? v : nil }
    }

    @Test("without a driver: a descriptor's handler runs when it is readable, and the run ends on its condition")
    func descriptorWithoutDriver() throws {
        let loop = EventLoop()
        let p = Pipe()
        var got: [UInt8] = []
        loop.watch(p.fds[0], .readable) { _ in if let b = p.read() { got.append(b) } }
        loop.schedule(afterMs: 20) { p.write(7) }
        let start = Instant.now()
        #expect(try loop.run(until: start.adding(ms: 2000), interruptible: false) { !got.isEmpty })
        #expect(got == [7])
        #expect(start.msUntil(Instant.now()) < 1000)
    }

    @Test("timers run in due order, a cancelled one never; the deadline ends a run with false")
    func timers() throws {
        let loop = EventLoop()
        var order: [Int] = []
        loop.schedule(afterMs: 30) { order.append(2) }
        let never = loop.schedule(afterMs: 10) { order.append(99) }
        loop.schedule(afterMs: 5) { order.append(1) }
        loop.cancel(never)
        #expect(try !loop.run(until: Instant.now().adding(ms: 60), interruptible: false) { false })
        #expect(order == [1, 2])
        #expect(loop.registrationCount == 0)
    }

    @Test("a run from inside a handler is refused as nested; the outer run goes on")
    func nested() throws {
        let loop = EventLoop()
        var inner: (any Error)?
        var ran = false
        loop.schedule(afterMs: 1) {
            do { _ = try loop.run(until: Instant.now().adding(ms: 10), interruptible: false) { false } } catch { inner = error }
            ran = true
        }
        #expect(try loop.run(until: Instant.now().adding(ms: 1000), interruptible: false) { ran })
        #expect(inner as? EventLoopError == .nested)
    }

    @Test("with an HCI host as driver, a descriptor wakes the transport's wait and its handler runs during pump")
    func descriptorBesideHost() throws {
        let ctl = ScriptedController()
        let loop = EventLoop()
        let host = HCIHost(transport: ctl, loop: loop)
        host.interruptible = false
        let p = Pipe()
        var got = false
        loop.watch(p.fds[0], .readable) { _ in _ = p.read(); got = true }
        host.schedule(afterMs: 10) { p.write(1) }
        #expect(try host.pump(until: Instant.now().adding(ms: 2000)) { got })
    }

    @Test("a host that fails ends its pump with the failure and leaves the loop to run on its own")
    func hostFailureDetaches() throws {
        let ctl = ScriptedController()
        let loop = EventLoop()
        let host = HCIHost(transport: ctl, loop: loop)
        host.interruptible = false
        host.schedule(afterMs: 1) { host.close(.closed) }
        #expect(throws: HCIError.closed) { try host.pump(until: Instant.now().adding(ms: 500)) { false } }
        #expect(loop.driver == nil)
        var ticked = false
        loop.schedule(afterMs: 1) { ticked = true }
        #expect(try loop.run(until: Instant.now().adding(ms: 500), interruptible: false) { ticked })
    }
}
