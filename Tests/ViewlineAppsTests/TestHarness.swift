import Testing
import Foundation
import ViewlineApps
import ViewlineKit
import ViewlinePersistence
import ViewlineTesting

/// The seed apps wired to fakes, an in-memory database and a test clock.
struct TestHarness: Sendable {
    let places = FakePlacesService()
    let remoteStore = FakeRemoteStore()
    let contactsSource: FakeContactsSource
    let playlists = FakePlaylistService()
    let clock = TestClock()
    let faults = FaultInjector()
    let store: any AppStore
    let users: UserDirectory
    let services: Services
    let application: Application

    let throttle: FailureThrottle

    init(
        admin: Bool = true, store: (any AppStore)? = nil, contacts: [Contact] = [], tokenLifetime: TimeInterval = 3600,
        passwordPool: BlockingPool = BlockingPool(threads: 1, queueLimit: 8), throttle: FailureThrottle = FailureThrottle()
    ) async throws {
        self.throttle = throttle
        let store = try store ?? SQLiteStore.inMemory()
        self.store = store
        contactsSource = FakeContactsSource(contacts)
        users = UserDirectory(store: store)
        try await users.load(UserDirectory.demoUsers)
        var services = Services()
        services.places = places
        services.remoteStore = remoteStore
        services.contactsSync = ContactsSyncCoordinator(source: contactsSource, store: store, faults: faults, clock: clock)
        services.contactsObservation = store.sharedContactsObservation()
        services.playlists = playlists
        services.users = users
        services.store = store
        services.clock = clock
        services.tokenLifetime = tokenLifetime
        services.passwordPool = passwordPool
        services.loginThrottle = throttle
        self.services = services
        var configuration = ServerConfiguration()
        configuration.admin = admin
        application = Application(SeedApps.all, services: services, faults: faults, configuration: configuration)
    }

    /// A new session of the seed apps and the recorder of everything it sends.
    func makeSession(id: String = "s1", peer: String? = nil) -> (Session, MessageRecorder) {
        let recorder = MessageRecorder()
        return (Session(id: id, application: application, peer: peer, output: recorder.output), recorder)
    }

    /// A test store over the seed apps, checking every message. Stores made from one
    /// harness share its backends, database and clock: sessions of one server.
    func makeStore(admin: Bool = true, id: String = "s1", peer: String? = nil) -> TestStore {
        TestStore(apps: SeedApps.all, services: services, faults: faults, admin: admin, id: id, peer: peer)
    }
}

extension Place {
    /// The place as a search result on the wire.
    var json: JSON { try! JSON(encoding: self) }
}
