import BLEWire

/// The result of an operation that completes later, inside the event loop
/// (`HCIHost.pump`): an ATT transaction, a GATT procedure, a connection.
///
/// Single-threaded like the rest of the stack: it is completed exactly once
/// (later completions are ignored), and its callbacks run synchronously at
/// the moment it completes, in the order they were added. A callback added
/// after completion runs at once. Chaining (`map`, `flatMap`, `recover`)
/// builds multi-step procedures that never block, so several links make
/// progress in one loop; `HCIHost.wait(_:)` turns one back into a blocking call.
public final class Future<Value> {
    /// The outcome, once known.
    public private(set) var result: Result<Value, any Error>?
    private var callbacks: [(Result<Value, any Error>) -> Void] = []

    /// A future completed later with `succeed`, `fail` or `complete`.
    public init() {}

    /// A future that already holds `value`.
    public init(value: Value) { result = .success(value) }

    /// A future that already failed with `error`.
    public init(error: any Error) { result = .failure(error) }

    /// True once completed.
    public var isComplete: Bool { result != nil }

    /// Completes with `result`; ignored when already complete (exactly once).
    public func complete(_ result: Result<Value, any Error>) {
        guard self.result == nil else { return }
        self.result = result
        let cbs = callbacks
        callbacks.removeAll()
        for cb in cbs { cb(result) }
    }

    /// Completes with a value.
    public func succeed(_ value: Value) { complete(.success(value)) }

    /// Completes with an error.
    public func fail(_ error: any Error) { complete(.failure(error)) }

    /// Runs `body` with the result when it is known (at once if it already is).
    public func whenComplete(_ body: @escaping (Result<Value, any Error>) -> Void) {
        if let r = result { body(r) } else { callbacks.append(body) }
    }

    /// Runs `body` with the value on success.
    public func whenSuccess(_ body: @escaping (Value) -> Void) {
        whenComplete { if case let .success(v) = $0 { body(v) } }
    }

    /// Runs `body` with the error on failure.
    public func whenFailure(_ body: @escaping (any Error) -> Void) {
        whenComplete { if case let .failure(e) = $0 { body(e) } }
    }

    /// A future of `transform(value)`; an error thrown by `transform` fails it.
    /// - Throws: Nothing itself; an error thrown by `transform` fails the returned future.
    public func map<T>(_ transform: @escaping (Value) throws -> T) -> Future<T> {
        let next = Future<T>()
        whenComplete { r in
            switch r {
            case .success(let v): next.complete(Result { try transform(v) })
            case .failure(let e): next.fail(e)
            }
        }
        return next
    }

    /// Chains a further asynchronous step after this one succeeds.
    /// - Throws: Nothing itself; an error thrown by `transform`, or a failure of
    ///   the future it returns, fails the returned future.
    public func flatMap<T>(_ transform: @escaping (Value) throws -> Future<T>) -> Future<T> {
        let next = Future<T>()
        whenComplete { r in
            switch r {
            case .success(let v):
                do { try transform(v).whenComplete { next.complete($0) } } catch { next.fail(error) }
            case .failure(let e): next.fail(e)
            }
        }
        return next
    }

    /// Replaces a failure with the outcome of `handler` (which may rethrow).
    /// - Throws: Nothing itself; an error thrown by `handler` fails the returned future.
    public func recover(_ handler: @escaping (any Error) throws -> Future<Value>) -> Future<Value> {
        let next = Future<Value>()
        whenComplete { r in
            switch r {
            case .success(let v): next.succeed(v)
            case .failure(let e):
                do { try handler(e).whenComplete { next.complete($0) } } catch { next.fail(error) }
            }
        }
        return next
    }

    /// Runs `body` whatever the outcome, then passes the outcome on.
    public func always(_ body: @escaping (Result<Value, any Error>) -> Void) -> Future<Value> {
        let next = Future<Value>()
        whenComplete { r in body(r); next.complete(r) }
        return next
    }
}

extension Future {
    /// Runs `body` to produce a future; an error it throws becomes a failed future.
    /// - Throws: Nothing itself; an error thrown by `body` is returned as a failed future.
    public static func attempt(_ body: () throws -> Future<Value>) -> Future<Value> {
        do { return try body() } catch { return Future(error: error) }
    }
}

extension Future where Value == Void {
    /// An already successful `Future<Void>`.
    public static var done: Future<Void> { Future(value: ()) }
}

/// Runs `step` over `items` one after another, each starting when the
/// previous one succeeded; the first failure ends the sequence.
/// - Throws: Nothing itself; an error thrown by `step` fails the returned future
///   and stops the sequence.
public func sequentially<T>(_ items: [T], _ step: @escaping (T) throws -> Future<Void>) -> Future<Void> {
    var i = 0
    let all = Future<Void>()
    func next() {
        guard i < items.count else { all.succeed(()); return }
        let item = items[i]
        i += 1
        Future.attempt { try step(item) }.whenComplete { r in
            switch r {
            case .success: next()
            case .failure(let e): all.fail(e)
            }
        }
    }
    next()
    return all
}
