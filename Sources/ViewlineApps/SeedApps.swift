import Foundation
import Synchronization
import ViewlineKit
import ViewlinePersistence

/// The seed flows as one server: the view-models in the order `state` and `help`
/// list them, and the live services they run on.
public enum SeedApps {
    /// Search, the session (log-in), drafts, contacts and the playlist.
    public static let all: [any ViewModel.Type] = [Search.self, Account.self, Drafts.self, Contacts.self, Playlist.self]

    /// Which release of the seed apps this process runs: 1, the default, or 2, whose
    /// search view records its state in a new form (``Search/record``: version 2,
    /// migrated from 1). Two releases of one app side by side are what a rolling
    /// deploy is rehearsed with (`viewline-server --seed-release 2`, the chaos run's
    /// `upgrade` fault). Set it before the application is built: a view's record
    /// declaration is read once, then.
    public static let release = Atomic<Int>(1)

    /// The releases ``release`` can be.
    public static let releases = 1...2

    /// What `viewline-server`'s app flags set.
    public struct Configuration: Sendable {
        /// Artificial latency of every built-in backend call.
        public var backendLatency: Duration = .zero
        /// A JSON array of `{"user", "password"}` added to the demo users.
        public var usersFile: String?
        /// Lifetime of an access token issued at login.
        public var tokenLifetime: TimeInterval = 3600
        /// A JSON array of contacts read at every sync (a built-in list without it).
        public var remoteContactsFile: String?
        /// Failed log-ins allowed per user and per address before each attempt must wait.
        public var loginFailuresBeforeThrottling = 5
        /// Log-ins waiting for or in password hashing at once; more fail with `server_busy`.
        public var loginQueueLimit = 32
        /// Log-ins from one address waiting for or in hashing at once; more fail with
        /// `server_busy` for that address only.
        public var loginQueueLimitPerAddress = 4

        /// Whether the demo users (alice/wonderland, bob/builder) can log in: for
        /// demos, the tutorial and tests (`--demo`), never by default.
        public var demoUsers = false
        public init() {}
    }

    /// Loads the users into `store` and builds the built-in backends over it.
    /// `faults` is the server's `fault` table (the contacts sync checks it once per fetch).
    public static func liveServices(_ configuration: Configuration, store: any AppStore, faults: FaultInjector) async throws -> Services {
        let clock = SystemWallClock()
        let users = UserDirectory(store: store)
        // The demo users only where asked for (`--demo`): never on a real deployment.
        var accounts = configuration.demoUsers ? UserDirectory.demoUsers : []
        if let file = configuration.usersFile {
            accounts += try UserDirectory.parseUsersFile(Data(contentsOf: URL(fileURLWithPath: file)))
        }
        try await users.load(accounts)
        let latency = configuration.backendLatency
        var services = Services()
        services.clock = clock
        services.store = store
        services.users = users
        services.tokenLifetime = configuration.tokenLifetime
        services.passwordPool = BlockingPool(
            threads: 1, queueLimit: configuration.loginQueueLimit, perKeyLimit: configuration.loginQueueLimitPerAddress,
            name: "passwords")
        services.loginThrottle = FailureThrottle(freeFailures: configuration.loginFailuresBeforeThrottling)
        services.places = PlacesServiceLive(latency: latency)
        services.remoteStore = RemoteDraftStoreLive(store: store, latency: latency, clock: clock)
        services.contactsSync = ContactsSyncCoordinator(
            source: ContactsSourceLive(file: configuration.remoteContactsFile, latency: latency),
            store: store, faults: faults, clock: clock)
        services.contactsObservation = store.sharedContactsObservation()
        services.playlists = PlaylistServiceLive(latency: latency)
        return services
    }
}
