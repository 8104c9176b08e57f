import Foundation
import ViewlineKit
import ViewlinePersistence

/// What the seed apps reach, as ``Services``: the server passes live parts, tests
/// pass fakes, a manual clock and an in-memory database.
extension Services {
    /// The places backend behind `search`.
    public var places: any PlacesService {
        get { self[PlacesKey.self] }
        set { self[PlacesKey.self] = newValue }
    }

    /// The remote store behind `save` and `saved`.
    public var remoteStore: any RemoteDraftStore {
        get { self[RemoteStoreKey.self] }
        set { self[RemoteStoreKey.self] = newValue }
    }

    /// The server-wide contacts sync (one fetch at a time).
    public var contactsSync: ContactsSyncCoordinator {
        get { self[ContactsSyncKey.self] }
        set { self[ContactsSyncKey.self] = newValue }
    }

    /// The contacts table, observed once for every session that shows it.
    public var contactsObservation: SharedObservation<ContactsSnapshot> {
        get { self[ContactsObservationKey.self] }
        set { self[ContactsObservationKey.self] = newValue }
    }

    /// The playlist backend behind `playlist` and `more`.
    public var playlists: any PlaylistService {
        get { self[PlaylistsKey.self] }
        set { self[PlaylistsKey.self] = newValue }
    }

    /// Who may log in.
    public var users: UserDirectory {
        get { self[UsersKey.self] }
        set { self[UsersKey.self] = newValue }
    }

    /// Drafts, contacts and users: SQLite or PostgreSQL.
    public var store: any AppStore {
        get { self[StoreKey.self] }
        set { self[StoreKey.self] = newValue }
    }

    /// Where passwords are hashed: a small bounded pool off the session executors.
    public var passwordPool: BlockingPool {
        get { self[PasswordPoolKey.self] }
        set { self[PasswordPoolKey.self] = newValue }
    }

    /// Who must wait before the next log-in attempt.
    public var loginThrottle: FailureThrottle {
        get { self[FailureThrottleKey.self] }
        set { self[FailureThrottleKey.self] = newValue }
    }

    /// How long an access token issued at login stays valid (default one hour).
    public var tokenLifetime: TimeInterval {
        get { self[TokenLifetimeKey.self] }
        set { self[TokenLifetimeKey.self] = newValue }
    }
}

/// The places backend behind `search`.
public enum PlacesKey: BackendKey {
    public typealias Value = any PlacesService
    public static let name = "search"
    public static let summary = "the places backend behind `search`"
}
/// The remote store behind `save`.
public enum RemoteStoreKey: BackendKey {
    public typealias Value = any RemoteDraftStore
    public static let name = "save"
    public static let summary = "the remote store behind `save`"
}
/// The remote contacts source behind `contacts` and `sync` (the coordinator checks `fault sync` once per fetch).
public enum ContactsSyncKey: BackendKey {
    public typealias Value = ContactsSyncCoordinator
    public static let name = "sync"
    public static let summary = "the remote contacts source behind `contacts` and `sync`"
}
enum ContactsObservationKey: ServiceKey { typealias Value = SharedObservation<ContactsSnapshot> }
/// The playlist backend behind `playlist` and `more`.
public enum PlaylistsKey: BackendKey {
    public typealias Value = any PlaylistService
    public static let name = "playlist"
    public static let summary = "the playlist backend behind `playlist` and `more`"
}
enum UsersKey: ServiceKey { typealias Value = UserDirectory }
enum StoreKey: ServiceKey { typealias Value = any AppStore }
enum PasswordPoolKey: ServiceKey { typealias Value = BlockingPool }
enum FailureThrottleKey: ServiceKey { typealias Value = FailureThrottle }
enum TokenLifetimeKey: ServiceKey { static let defaultValue: TimeInterval? = 3600 }

extension AppStore {
    /// The contacts table as a shared observation: one store observation for the
    /// whole server, however many sessions show the contacts view.
    public func sharedContactsObservation() -> SharedObservation<ContactsSnapshot> {
        SharedObservation { [self] in observeContacts() }
    }
}
