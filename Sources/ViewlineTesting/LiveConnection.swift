import NIOCore
import NIOPosix
import Synchronization
import ViewlineKit

/// A ``TestStore``'s way to its session in ``TestStore/Mode/live``: a real server on a
/// loopback port picked by the system, and one TCP connection to it that reads lines
/// back into messages, as a client does.
final class LiveConnection: Sendable {
    let server: ViewlineServer
    private let channel: any Channel
    private let serving: Task<Void, Never>
    private let reader: LineReader

    /// The id of the `ping` that ``sync()`` sends: its reply is not recorded.
    static let syncID: JSON = "teststore-sync"

    private init(server: ViewlineServer, channel: any Channel, serving: Task<Void, Never>, reader: LineReader) {
        self.server = server
        self.channel = channel
        self.serving = serving
        self.reader = reader
    }

    /// Starts `application` on a port of its own and connects to it; returns once
    /// the connection was welcomed, with the server-side session.
    static func start(_ application: Application, configuration: ServerConfiguration, recorder: MessageRecorder) async throws -> (
        LiveConnection, Session
    ) {
        let server = try ViewlineServer(application: application, configuration: configuration, logger: application.logger)
        let serving = Task<Void, Never> { _ = try? await server.run() }
        let reader = LineReader(recorder: recorder)
        do {
            let port = try await server.listeningAddress.port
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(reader) }
                }
                .connect(host: "127.0.0.1", port: port).get()
            let connection = LiveConnection(server: server, channel: channel, serving: serving, reader: reader)
            let id = try await reader.welcome()
            guard let session = application.sessions.all.first(where: { $0.id == id }) else {
                await connection.close()
                throw LiveConnectionError(description: "the server has no session \(id) after welcoming it")
            }
            return (connection, session)
        } catch {
            await server.shutdown()
            await serving.value
            throw error
        }
    }

    /// Sends one line as a client would.
    func send(_ line: String) async throws {
        var buffer = channel.allocator.buffer(capacity: line.utf8.count + 1)
        buffer.writeString(line)
        buffer.writeInteger(UInt8(ascii: "\n"))
        try await channel.writeAndFlush(buffer)
    }

    /// Returns once everything the server sent before now has been read: a `ping`'s
    /// reply follows every line the server wrote to the connection before it.
    func sync(timeout: Duration) async throws {
        let waiter = reader.expectSync()
        try await send(#"{"id":"teststore-sync","cmd":"ping"}"#)
        try await waiter.get(timeout: timeout)
    }

    /// Closes the connection and shuts the server down.
    func close() async {
        try? await channel.close()
        await server.shutdown()
        await serving.value
    }
}

struct LiveConnectionError: Error, CustomStringConvertible {
    let description: String
}

/// Splits what the server sends into lines, parses each into a ``ServerMessage`` and
/// records it (the `welcome` and ``LiveConnection/sync()``'s replies excepted).
private final class LineReader: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    private struct State {
        var pending: [UInt8] = []
        var welcomed: String?
        var welcomeWaiter: OneShot<String>?
        var syncWaiters: [OneShot<Void>] = []
    }
    private let state = Mutex(State())
    private let recorder: MessageRecorder

    init(recorder: MessageRecorder) { self.recorder = recorder }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let lines: [[UInt8]] = state.withLock { state in
            state.pending += buffer.readableBytesView
            var lines: [[UInt8]] = []
            while let end = state.pending.firstIndex(of: 0x0A) {
                lines.append(Array(state.pending[..<end]))
                state.pending.removeSubrange(...end)
            }
            return lines
        }
        for line in lines { take(line) }
    }

    private func take(_ line: [UInt8]) {
        guard let message = ServerMessage(line: line) else {
            recorder.output(
                .reply(
                    re: .null,
                    result: .failure(
                        ProtocolError(.badJSON, "the test store could not read the server's line: \(String(decoding: line, as: UTF8.self))"))))
            return
        }
        switch message {
        case .welcome(let session, _, _, _):
            let waiter = state.withLock { state -> OneShot<String>? in
                state.welcomed = session
                return state.welcomeWaiter
            }
            waiter?.fulfil(session)
        case .reply(let re, _) where re == LiveConnection.syncID:
            let waiter = state.withLock { $0.syncWaiters.isEmpty ? nil : $0.syncWaiters.removeFirst() }
            waiter?.fulfil(())
        default:
            recorder.output(message)
        }
    }

    func welcome() async throws -> String {
        let waiter = OneShot<String>()
        if let id = state.withLock({ state -> String? in
            if state.welcomed == nil { state.welcomeWaiter = waiter }
            return state.welcomed
        }) {
            return id
        }
        return try await waiter.get(timeout: .seconds(10))
    }

    func expectSync() -> OneShot<Void> {
        let waiter = OneShot<Void>()
        state.withLock { $0.syncWaiters.append(waiter) }
        return waiter
    }
}

/// A value given once and awaited with a timeout.
final class OneShot<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)

    func fulfil(_ given: Value) { value.withLock { $0 = given } }

    func get(timeout: Duration) async throws -> Value {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let given = value.withLock({ $0 }) { return given }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw LiveConnectionError(description: "the live server did not answer within \(timeout)")
    }
}
