/// A named place for one piece of a session's background work. Starting work in a
/// slot cancels the work already there: latest wins, in one line
/// (`session.run(.search) { … }`).
///
/// ```swift
/// extension TaskSlot { static let search = TaskSlot("search") }
/// ```
public struct TaskSlot: Hashable, Sendable, CustomStringConvertible {
    /// The slot's name (for logs and tests).
    public let name: String
    /// A slot named `name`; two slots with the same name are the same slot.
    public init(_ name: String) { self.name = name }
    public var description: String { name }
}
