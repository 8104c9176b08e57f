import Foundation
import Synchronization
import ViewlineKit
import ViewlinePersistence

/// The users who can log in, kept only as salted hashes, in memory and in the database.
public final class UserDirectory: Sendable {
    /// The demo users a server started with `--demo` knows (documented in the README).
    public static let demoUsers: [(user: String, password: String)] = [("alice", "wonderland"), ("bob", "builder")]

    private let hashes = Mutex<[String: String]>([:])
    private let store: (any AppStore)?
    /// Checked for unknown users too, so a wrong name costs as much as a wrong password.
    private let decoy: String

    public init(store: (any AppStore)?) {
        self.store = store
        self.decoy = PasswordHasher.hash("decoy-\(UInt64.random(in: .min ... .max))") ?? "*"
    }

    /// Loads the hashes already in the database, then adds `users` (hashing them).
    public func load(_ users: [(user: String, password: String)]) async throws {
        if let store {
            let stored = try await store.passwordHashes()
            hashes.withLock { $0.merge(stored) { _, new in new } }
        }
        for (user, password) in users { try await add(user: user, password: password) }
    }

    public func add(user: String, password: String) async throws {
        guard let hash = PasswordHasher.hash(password) else {
            throw ServiceError("users", "could not hash the password for \(user)")
        }
        hashes.withLock { $0[user] = hash }
        try await store?.storeUser(user, passwordHash: hash)
    }

    /// Whether `password` is `user`'s; says nothing about which part was wrong.
    public func verify(user: String, password: String) -> Bool {
        let hash = hashes.withLock { $0[user] }
        let ok = PasswordHasher.verify(password, against: hash ?? decoy)
        return ok && hash != nil
    }

    public var userNames: [String] { hashes.withLock { $0.keys.sorted() } }

    /// Parses a `--users` file: a JSON array of `{"user": ..., "password": ...}`.
    public static func parseUsersFile(_ data: Data) throws -> [(user: String, password: String)] {
        struct Entry: Decodable { var user: String; var password: String }
        return try JSONDecoder().decode([Entry].self, from: data).map { ($0.user, $0.password) }
    }
}
