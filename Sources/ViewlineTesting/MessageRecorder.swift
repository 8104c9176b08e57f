import Foundation
import Synchronization
import ViewlineKit

/// Collects what a session sends, for tests to assert on in order: a ``TestStore``'s
/// ``TestStore/recorder`` holds every message its session sent, asserted or not.
public final class MessageRecorder: Sendable {
    private let messages = Mutex<[ServerMessage]>([])

    /// A recorder with nothing recorded.
    public init() {}

    /// Where the session sends: every message is appended.
    public var output: @Sendable (ServerMessage) -> Void {
        { message in self.messages.withLock { $0.append(message) } }
    }

    /// Every message so far, in order.
    public var all: [ServerMessage] { messages.withLock { $0 } }

    /// Forgets the messages so far.
    public func clear() { messages.withLock { $0.removeAll() } }

    /// Displays of one view, in order, as their `state`.
    public func displays(_ view: String) -> [JSON] {
        all.compactMap {
            if case .display(_, let v, let state) = $0, v == view { return state }
            return nil
        }
    }

    /// Every alert so far, in order.
    public var alerts: [(id: String, content: AlertContent)] {
        all.compactMap {
            if case .alert(_, let id, let content) = $0 { return (id, content) }
            return nil
        }
    }

    /// Every reply so far, in order.
    public var replies: [Result<JSON, ProtocolError>] {
        all.compactMap {
            if case .reply(_, let result) = $0 { return result }
            return nil
        }
    }

    /// The revs of the events so far, in order (they must only grow).
    public var revs: [Int] { all.compactMap(\.rev) }

    /// Waits until `predicate` holds for the messages so far (polling; fails after `timeout`).
    @discardableResult
    public func waitUntil(
        timeout: Duration = .seconds(10), _ what: String = "condition",
        _ predicate: @Sendable ([ServerMessage]) -> Bool
    ) async throws -> [ServerMessage] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let snapshot = all
            if predicate(snapshot) { return snapshot }
            try await Task.sleep(for: .milliseconds(2))
        }
        throw TestTimeout(what: what, messages: all.map(\.json.encoded))
    }
}

/// ``MessageRecorder/waitUntil(timeout:_:_:)`` gave up: what it waited for, and what came.
public struct TestTimeout: Error, CustomStringConvertible {
    /// What the test waited for.
    public var what: String
    /// Every message recorded by then, as wire lines.
    public var messages: [String]
    public var description: String { "timed out waiting for \(what); got:\n" + messages.joined(separator: "\n") }
}
