/// The backends, database and clock a server's view-models reach, looked up by key
/// so that a test swaps any of them for a fake.
///
/// ```swift
/// enum PlacesKey: ServiceKey { typealias Value = any PlacesService }
/// extension Services {
///     var places: any PlacesService { get { self[PlacesKey.self] } set { self[PlacesKey.self] = newValue } }
/// }
/// ```
public struct Services: Sendable {
    private var values: [ObjectIdentifier: any Sendable] = [:]

    /// Services with the system clock and real sleeping.
    public init() {}

    /// The service stored under `key`.
    ///
    /// - Precondition: the server or test provided it: a missing service is a wiring
    ///   mistake, reported with the key's name.
    public subscript<Key: ServiceKey>(_ key: Key.Type) -> Key.Value {
        get {
            guard let value = value(for: key) else { preconditionFailure("no \(Key.self) service: provide it in the server's Services") }
            return value
        }
        set { values[ObjectIdentifier(key)] = newValue }
    }

    /// The service stored under `key` or its default; `nil` when neither exists.
    public func value<Key: ServiceKey>(for key: Key.Type) -> Key.Value? {
        if let value = values[ObjectIdentifier(key)] { return (value as! Key.Value) }
        return Key.defaultValue
    }

    /// Whether `key` has a value here (provided, or the key's default).
    public func contains<Key: ServiceKey>(_ key: Key.Type) -> Bool {
        values[ObjectIdentifier(key)] != nil || Key.defaultValue != nil
    }
}

/// The key of one service in ``Services``.
public protocol ServiceKey {
    /// The service's type: often a protocol existential (`any PlacesService`), so tests pass fakes.
    associatedtype Value: Sendable
    /// What the key gives when nobody provided it; `nil` makes it required.
    static var defaultValue: Value? { get }
}

extension ServiceKey {
    /// No default: the service must be provided.
    public static var defaultValue: Value? { nil }
}

enum WallClockKey: ServiceKey {
    static var defaultValue: (any WallClock)? { SystemWallClock() }
}

enum SleepKey: ServiceKey {
    static var defaultValue: (@Sendable (Duration) async throws -> Void)? { { try await SleepTimer.sleep(for: $0) } }
}

extension Services {
    /// What time it is (token lifetimes, timestamps). Tests set a manual clock.
    public var clock: any WallClock {
        get { self[WallClockKey.self] }
        set { self[WallClockKey.self] = newValue }
    }

    /// How the runtime sleeps (`wait`'s timeout). Tests make it return at once or never.
    public var sleep: @Sendable (Duration) async throws -> Void {
        get { self[SleepKey.self] }
        set { self[SleepKey.self] = newValue }
    }
}
