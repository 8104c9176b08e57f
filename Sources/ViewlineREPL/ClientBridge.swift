import Dispatch
import Synchronization
import ViewlineClient

#if canImport(Glibc)
    import Glibc
#endif

/// The REPL's side of a ``ViewlineClient``: the one implementation of the protocol's
/// client side (reconnect, resume from the last rev, `moved`, commands sent again
/// after a `bye`) driven from a blocking libedit loop.
///
/// Everything the client hears comes out of ``take()`` in the order it arrived, and
/// ``fd`` turns readable when there is something to take, so the REPL `poll()`s it
/// beside the keyboard. Calls that wait (connecting, a command's reply) block the
/// calling thread, never the client's.
public final class ClientBridge: Sendable {
    /// What the client heard, in order.
    enum Item: Sendable {
        /// A message from the server, as it came (replies included).
        case message(JSON)
        /// The connection's state changed (resuming, resumed, ended).
        case connection(ConnectionState)
        /// The reply to the request ``send(_:)`` numbered, or why none came.
        case answered(request: Int, Result<JSON, any Error>)
        /// The client is closed: nothing more comes.
        case finished
    }

    let client: ViewlineClient
    private let queue = Mutex<[Item]>([])
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let requests = Atomic<Int>(0)

    private init(client: ViewlineClient, messages: AsyncStream<JSON>, events: AsyncStream<ViewlineEvent>) {
        self.client = client
        var ends: [Int32] = [0, 0]
        precondition(pipe(&ends) == 0, "cannot make a pipe")
        wakeRead = ends[0]
        wakeWrite = ends[1]
        // Neither end blocks: a full pipe already says "something to take".
        _ = fcntl(wakeRead, F_SETFL, fcntl(wakeRead, F_GETFL) | O_NONBLOCK)
        _ = fcntl(wakeWrite, F_SETFL, fcntl(wakeWrite, F_GETFL) | O_NONBLOCK)
        Task { [self] in
            for await message in messages { put(.message(message)) }
            put(.finished)
        }
        Task { [self] in
            for await event in events {
                if case .connection(let state) = event { put(.connection(state)) }
            }
        }
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Connects and starts a session (the server's `welcome` is ``ViewlineClient/welcome``).
    static func connect(to endpoint: Endpoint, options: ViewlineClient.Options) throws -> ClientBridge {
        try wait {
            let client = try await ViewlineClient.connect(to: endpoint, options: options)
            return ClientBridge(client: client, messages: await client.messages(), events: await client.events())
        }
    }

    /// Readable while ``take()`` has something.
    var fd: Int32 { wakeRead }

    /// Everything heard since the last call, in order.
    func take() -> [Item] {
        var sink = [UInt8](repeating: 0, count: 256)
        while read(wakeRead, &sink, sink.count) > 0 {}
        return queue.withLock { queue in
            defer { queue = [] }
            return queue
        }
    }

    /// Sends a typed line; its reply comes out of ``take()`` as `.answered` with the
    /// returned number (after the reply's `.message`, or just before it).
    func send(_ line: String) -> Int {
        let request = requests.add(1, ordering: .relaxed).newValue
        Task { [self] in
            do {
                put(.answered(request: request, .success(try await client.exchange(line))))
            } catch {
                put(.answered(request: request, .failure(error)))
            }
        }
        return request
    }

    /// Runs `body` against the client and blocks until it is done.
    func run<T: Sendable>(_ body: @escaping @Sendable (ViewlineClient) async throws -> T) throws -> T {
        let client = client
        return try Self.wait { try await body(client) }
    }

    /// Blocks the calling thread (the REPL's, never one of the client's) until `work` is done.
    static func wait<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<T, any Error>?>(nil)
        Task {
            let result: Result<T, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    /// Blocks until ``fd`` is readable or `milliseconds` pass (−1: no limit).
    func waitForItems(milliseconds: Int32 = -1) {
        var descriptor = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
        while poll(&descriptor, 1, milliseconds) < 0 && errno == EINTR {}
    }

    /// Items kept for the REPL before the oldest message goes: a server flooding
    /// events, or replies nobody asked for, while the REPL waits on its terminal
    /// cannot grow this without limit. An event goes first; only a queue of nothing
    /// but replies (a server answering what was never sent) loses its oldest reply.
    /// Connection changes, answers and the end are never dropped.
    static let maximumQueued = 4096

    private func put(_ item: Item) {
        queue.withLock { queue in
            if queue.count >= Self.maximumQueued, case .message = item {
                // Among the oldest few (so a queue of replies costs no scan of it all).
                let oldest =
                    queue.prefix(64).firstIndex { if case .message(let message) = $0 { message["type"] != "reply" } else { false } }
                    ?? queue.firstIndex { if case .message = $0 { true } else { false } }
                if let oldest { queue.remove(at: oldest) }
            }
            queue.append(item)
        }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }
}
