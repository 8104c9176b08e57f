import Logging
import ServiceLifecycle
import ViewlineKit

/// The server's service in `viewline-server`'s `ServiceGroup`: it builds the
/// `ViewlineServer` once the group runs (so the database client beside it in the
/// group already runs while the store migrates and the cluster agrees on its node
/// timeout), then runs it and says where it listens.
///
/// The group shuts its services down in reverse order: this one first (the server
/// drains, says `bye`, writes its records and leaves the cluster), then the
/// database client.
struct ServerNode: Service {
    /// Builds the server: migrations, services, cluster.
    let start: @Sendable () async throws -> ViewlineServer
    /// Told the server's addresses once it has bound them.
    let listening: @Sendable (ViewlineServer) -> Void
    let logger: Logger

    func run() async throws {
        let server: ViewlineServer
        do {
            server = try await start()
        } catch {
            // PostgresNIO hides a server's message from `description`: say it here.
            logger.error("could not start", metadata: ["error": "\(String(reflecting: error))"])
            throw error
        }
        async let serving: Void = server.run()
        let bound = (try? await server.listeningAddress) != nil
        if bound { listening(server) }
        do {
            try await serving
        } catch {
            // What kept it from binding (`listeningAddress` threw the same), or what
            // stopped it since: said once.
            logger.error(bound ? "stopped" : "could not start", metadata: ["error": "\(String(reflecting: error))"])
            throw error
        }
    }
}
