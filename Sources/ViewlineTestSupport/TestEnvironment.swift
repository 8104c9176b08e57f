import Foundation
import ViewlineCore
import ViewlinePersistence
import ViewlineProtocol

/// A session wired to fakes, an in-memory database and a manual clock.
public struct TestHarness: Sendable {
    public let places = FakePlacesService()
    public let remoteStore = FakeRemoteStore()
    public let contactsSource: FakeContactsSource
    public let playlists = FakePlaylistService()
    public let clock = ManualWallClock()
    public let faults = FaultInjector()
    public let database: AppDatabase
    public let users: UserDirectory
    public let environment: SessionEnvironment

    public init(admin: Bool = true, database: AppDatabase? = nil, contacts: [Contact] = [], tokenLifetime: TimeInterval = 3600) async throws {
        let database = try database ?? AppDatabase.inMemory()
        self.database = database
        contactsSource = FakeContactsSource(contacts)
        users = UserDirectory(database: database)
        try await users.load(UserDirectory.demoUsers)
        environment = SessionEnvironment(
            places: places, remoteStore: remoteStore,
            contactsSync: ContactsSyncCoordinator(source: contactsSource, database: database, faults: faults, clock: clock),
            playlists: playlists, users: users, database: database, faults: faults, clock: clock,
            tokenLifetime: tokenLifetime, admin: admin)
    }

    /// A new session and the recorder of everything it sends.
    public func makeSession(id: String = "s1") -> (Session, MessageRecorder) {
        let recorder = MessageRecorder()
        return (Session(id: id, environment: environment, output: recorder.output), recorder)
    }
}

extension Session {
    /// Sends an inline command line, as a client would.
    @discardableResult
    public func send(_ line: String) async -> Outcome {
        switch RequestDecoder.decode(line: line) {
        case .success(let request)?: return await handle(request)
        case .failure(let failure)?:
            reject(re: failure.re, failure.error)
            return .keepOpen
        case nil: return .keepOpen
        }
    }
}
