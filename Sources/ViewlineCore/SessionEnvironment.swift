import Foundation
import ViewlinePersistence

/// Everything a session reaches outside itself. The server passes live parts;
/// tests pass fakes, a manual clock and an in-memory database.
public struct SessionEnvironment: Sendable {
    public var places: any PlacesService
    public var remoteStore: any RemoteDraftStore
    public var contactsSync: ContactsSyncCoordinator
    public var playlists: any PlaylistService
    public var users: UserDirectory
    public var database: AppDatabase
    public var faults: FaultInjector
    public var clock: any WallClock
    /// How long an access token issued at login stays valid.
    public var tokenLifetime: TimeInterval
    /// Whether admin commands (`fault`) are enabled.
    public var admin: Bool
    /// Sleeps for `wait`'s timeout; injected so tests never sleep for real.
    public var sleep: @Sendable (Duration) async throws -> Void
    /// Names the server in `welcome`.
    public var serverName: String

    public init(
        places: any PlacesService, remoteStore: any RemoteDraftStore, contactsSync: ContactsSyncCoordinator,
        playlists: any PlaylistService, users: UserDirectory, database: AppDatabase, faults: FaultInjector,
        clock: any WallClock, tokenLifetime: TimeInterval = 3600, admin: Bool = false,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        serverName: String = "viewline/1.0"
    ) {
        self.places = places
        self.remoteStore = remoteStore
        self.contactsSync = contactsSync
        self.playlists = playlists
        self.users = users
        self.database = database
        self.faults = faults
        self.clock = clock
        self.tokenLifetime = tokenLifetime
        self.admin = admin
        self.sleep = sleep
        self.serverName = serverName
    }
}
