/// A session's attached connections by number: every event goes to each, a reply to
/// its sender's.
///
/// A session almost always has one connection, so the first is kept inline and only
/// a second or later one goes into a dictionary: a connected session holds no table
/// for its one connection (a dictionary's smallest is 120 bytes and an allocation).
/// The order of iteration is unspecified, as a dictionary's.
struct SessionConnections: Sequence, ExpressibleByDictionaryLiteral {
    private var first: (number: Int, connection: SessionConnection)?
    private var more: [Int: SessionConnection] = [:]

    init(dictionaryLiteral elements: (Int, SessionConnection)...) {
        for (number, connection) in elements { self[number] = connection }
    }

    var count: Int { (first == nil ? 0 : 1) + more.count }
    var isEmpty: Bool { first == nil }

    /// Connection `number`, if it is attached; setting `nil` detaches it (the table
    /// of the others goes once it is empty).
    subscript(number: Int) -> SessionConnection? {
        get {
            if let first, first.number == number { return first.connection }
            return more.isEmpty ? nil : more[number]
        }
        set {
            if let first, first.number == number {
                if let newValue {
                    self.first = (number, newValue)
                } else if let next = more.first {
                    more.removeValueReleasingStorage(forKey: next.key)
                    self.first = (next.key, next.value)
                } else {
                    self.first = nil
                }
            } else if let newValue {
                if first == nil { first = (number, newValue) } else { more[number] = newValue }
            } else {
                more.removeValueReleasingStorage(forKey: number)
            }
        }
    }

    /// Detaches connection `number`, as setting it to `nil` does.
    mutating func removeValueReleasingStorage(forKey number: Int) {
        self[number] = nil
    }

    /// The connections, without their numbers.
    var values: LazyMapSequence<Self, SessionConnection> { lazy.map(\.connection) }

    func makeIterator() -> Iterator {
        Iterator(first: first, more: more.makeIterator())
    }

    struct Iterator: IteratorProtocol {
        fileprivate var first: (number: Int, connection: SessionConnection)?
        fileprivate var more: [Int: SessionConnection].Iterator

        mutating func next() -> (number: Int, connection: SessionConnection)? {
            if let first {
                self.first = nil
                return first
            }
            return more.next().map { ($0.key, $0.value) }
        }
    }
}
