import Logging
import Synchronization
import Testing
import ViewlineKit
import ViewlineProtocol
import ViewlineTesting

/// A command's unexpected error: the client gets `internal_error` and a generic
/// message, the server's log gets the error with its session and command.
@Suite struct UnexpectedErrorTests {
    /// A view-model whose one command fails with an error a backend might raise,
    /// words a client must never see.
    enum Leaky: ViewModel {
        struct State: Codable, Sendable, Equatable {}
        struct BackendSaid: Error { let words = "password=hunter2 at 10.0.0.7:5432" }
        static let view = "leaky"
        static let stateSummary = "{}"
        static func initialState(_ services: Services) -> State { State() }
        static let commands: [Command<Leaky>] = [
            Command("fail", summary: "Fail the way a backend does.") { _, _ in throw BackendSaid() },
            Command("crowd", summary: "Fail as a full pool does.") { _, _ in throw BlockingPool.Full() },
        ]
    }

    /// Keeps what is logged.
    final class Captured: LogHandler, @unchecked Sendable {
        let lines = Mutex<[(Logger.Message, Logger.Metadata)]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.withLock { $0.append((event.message, self.metadata.merging(event.metadata ?? [:]) { $1 })) }
        }
    }

    /// Runs `command` on a session `id`; returns its error reply and the first line
    /// logged after the command's own debug line.
    func failure(of command: String, session id: String) async throws -> (ProtocolError, Logger.Metadata) {
        let captured = Captured()
        let application = Application([Leaky.self], logger: Logger(label: "test") { _ in captured })
        let sent = Mutex<[ServerMessage]>([])
        let session = Session(id: id, application: application) { message in sent.withLock { $0.append(message) } }
        await session.send(command)
        guard case .reply(_, .failure(let error))? = sent.withLock({ $0.last }) else { throw Unexpected() }
        return (error, try #require(captured.lines.withLock { $0.first { "\($0.0)" != "command" } }).1)
    }

    struct Unexpected: Error {}

    @Test func theClientGetsAGenericInternalErrorAndTheLogGetsTheError() async throws {
        let (error, logged) = try await failure(of: "fail", session: "s7")
        #expect(error.code == .internalError)
        #expect(!error.message.contains("hunter2") && !error.message.contains("10.0.0.7"), "\(error.message)")
        #expect(logged["session"] == "s7" && logged["command"] == "fail")
        #expect("\(logged["error"] ?? "")".contains("hunter2"))
    }

    @Test func aFullPoolIsServerBusyAndTheLogKeepsWhatItStoodFor() async throws {
        let (error, logged) = try await failure(of: "crowd", session: "s8")
        #expect(error == ProtocolError(.serverBusy, "the server is busy; try again in a moment", retryAfter: 1))
        #expect(logged["session"] == "s8" && logged["code"] == "server_busy")
        #expect("\(logged["error"] ?? "")" == "the blocking work pool is full", "the log names the error the code stands for")
    }
}
