import Foundation

/// How a view's state is kept in a session's record — what a restart or a failover
/// gives back — and how a record an older release wrote becomes this release's.
///
/// A ``ViewModel`` whose `State` is `Decodable` records its `Codable` form by default
/// (version 1); one that is not is not recorded (its view starts at its initial state
/// after a restore) unless it declares a form of its own. Change the recorded form
/// in a release — a field renamed, a new field without a default — and raise the
/// version, with a migration from the previous one:
///
/// ```swift
/// static let record = StateRecord<State>.codable(version: 2)
///     .migrating(from: 1) { state in
///         // 1 → 2: `text` became `body`.
///         state["body"] = state["text"] ?? ""
///         state["text"] = nil
///     }
/// ```
///
/// A record this release cannot read — a newer version, a missing migration, a
/// decode error — is never turned into a fresh state silently: the attach is
/// refused with `record_unreadable` and the stored record is left as it is (a later
/// release may read it), unless the declaration allows the view to start at its
/// initial state instead (``WhenRecordUnreadable/startAtInitialState``). Either way the
/// server logs it, counts it (`viewline_records_unreadable_total{view,reason}`) and
/// lists it in `inspect`.
public struct StateRecord<State: Sendable>: Sendable {
    /// The version of the form this release writes (1 at first).
    public let version: Int
    /// What a restore does with a record of this view it cannot read.
    public let whenUnreadable: WhenUnreadable
    /// The state's wire form is its recorded form: the record reuses the bytes
    /// `display` already has.
    let recordsWireForm: Bool
    let encode: @Sendable (State) throws -> JSON
    let decode: @Sendable (JSON) throws -> State
    /// Version `n`'s record to version `n + 1`'s, by `n`.
    let migrations: [Int: @Sendable (inout JSON) throws -> Void]

    /// What a restore does with a record of the view it cannot read.
    public typealias WhenUnreadable = WhenRecordUnreadable

    /// A record whose form is the state's `Codable` form, `version` of it.
    public static func codable(version: Int = 1, whenUnreadable: WhenUnreadable = .refuseAttach) -> StateRecord
    where State: Codable {
        StateRecord(
            version: version, whenUnreadable: whenUnreadable, recordsWireForm: true, encode: { try JSON(encoding: $0) },
            decode: { try $0.decode(State.self) }, migrations: [:])
    }

    /// A record of a form of its own: `Recorded`, mapped from the state by `record` and
    /// back by `restore` — for a state whose `Encodable` form (what clients see) leaves
    /// out what a restore needs (a page size, the next id).
    public static func codable<Recorded: Codable>(
        as recorded: Recorded.Type, version: Int = 1, whenUnreadable: WhenUnreadable = .refuseAttach,
        record: @escaping @Sendable (State) -> Recorded, restore: @escaping @Sendable (Recorded) -> State
    ) -> StateRecord {
        StateRecord(
            version: version, whenUnreadable: whenUnreadable, recordsWireForm: false, encode: { try JSON(encoding: record($0)) },
            decode: { restore(try $0.decode(Recorded.self)) }, migrations: [:])
    }

    /// This declaration with a migration of a record of `version` to `version + 1`'s
    /// form: it edits the recorded state (JSON) in place, or throws when it cannot.
    /// A record several versions old goes through every step in order.
    public func migrating(from version: Int, _ migrate: @escaping @Sendable (inout JSON) throws -> Void) -> StateRecord {
        var migrations = self.migrations
        migrations[version] = migrate
        return StateRecord(
            version: self.version, whenUnreadable: whenUnreadable, recordsWireForm: recordsWireForm, encode: encode, decode: decode,
            migrations: migrations)
    }

    /// The state a record of `recorded`'s version holds, migrated to this version:
    /// what a restore does with the view's part of a record. Test a migration with it,
    /// from a record an older release wrote (a fixture):
    ///
    /// ```swift
    /// let old: JSON = ["text": "milk"]  // version 1's form
    /// #expect(try Notes.record!.read(old, recordedVersion: 1).get() == Notes.State(body: "milk"))
    /// ```
    public func read(_ state: JSON, recordedVersion recorded: Int) -> Result<State, UnreadableRecord.Reason> {
        guard recorded <= version else { return .failure(.newer) }
        var state = state
        for step in recorded..<version {
            guard let migrate = migrations[step] else { return .failure(.noMigration(from: step)) }
            do {
                try migrate(&state)
            } catch {
                return .failure(.migrationFailed(from: step, "\(error)"))
            }
        }
        do {
            return .success(try decode(state))
        } catch {
            return .failure(.decode("\(error)"))
        }
    }
}

/// What a restore does with a view's record it cannot read (``StateRecord``).
public enum WhenRecordUnreadable: Sendable, Equatable {
    /// The attach is refused (`record_unreadable`): the session's record stays as it
    /// was, for a release that reads it. The default.
    case refuseAttach
    /// The session is restored with this view at its initial state (the rest of the
    /// session comes back): for a view whose state is cheap to lose.
    case startAtInitialState
}

/// A view's record a restore could not read: which view, why, and what became of
/// the attach (`inspect`'s `unreadableRecords`, the log, the metric).
public struct UnreadableRecord: Sendable, Equatable {
    /// Why a record could not be read.
    public enum Reason: Error, Sendable, Equatable {
        /// Written by a release that records a newer version than this one knows.
        case newer
        /// No migration from this version to the next.
        case noMigration(from: Int)
        /// The migration from this version threw.
        case migrationFailed(from: Int, String)
        /// The (migrated) state did not decode.
        case decode(String)

        /// The reason's name in the metric and `inspect`.
        public var name: String {
            switch self {
            case .newer: "newer"
            case .noMigration: "no_migration"
            case .migrationFailed: "migration_failed"
            case .decode: "decode"
            }
        }

        /// What went wrong, in words.
        public var detail: String {
            switch self {
            case .newer: "the record is of a newer version than this release knows"
            case .noMigration(let from): "no migration from version \(from)"
            case .migrationFailed(let from, let error): "the migration from version \(from) failed: \(error)"
            case .decode(let error): "the state did not decode: \(error)"
            }
        }
    }

    /// The session (its id) and the view.
    public var session: String
    /// The view whose record could not be read.
    public var view: String
    /// The version the record was written at, and the one this release writes.
    public var recordedVersion: Int
    /// This release's version of the view's record.
    public var version: Int
    /// Why.
    public var reason: Reason
    /// Whether the attach was refused (else the view started at its initial state).
    public var refused: Bool
}

extension JSON {
    /// A `Decodable` value from this JSON.
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(encoded.utf8))
    }
}
