/// A named place for one piece of a session's background work. Starting work in a
/// slot cancels the work already there: latest wins, in one line
/// (`session.run(.search) { … }`).
///
/// ```swift
/// extension TaskSlot { static let search = TaskSlot("search") }
/// ```
public struct TaskSlot: Hashable, Sendable, CustomStringConvertible {
    public let name: String
    public init(_ name: String) { self.name = name }
    public var description: String { name }
}
