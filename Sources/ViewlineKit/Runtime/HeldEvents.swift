/// Events held back for the connections whose commands are running, until each
/// one's reply is out (a reply precedes the events its command causes, on its own
/// connection; the session's other connections get them at once).
///
/// A connection runs one command at a time. The common case — one command running
/// in the session — costs no hashing and, once it is over, no memory: its events
/// wait in one array that is let go at the reply.
struct HeldEvents {
    /// An event's line, encoded once for every connection and log.
    typealias Event = [UInt8]

    /// The connection whose command runs, when only one does (`nil`: none).
    private var first: Int?
    private var firstEvents: [Event] = []
    /// Other connections running a command at the same time.
    private var others: [Int: [Event]] = [:]

    /// Whether no command is running (events go straight out).
    var isEmpty: Bool { first == nil && others.isEmpty }

    /// A command from `connection` starts: its events are held from now on.
    mutating func begin(_ connection: Int) {
        if first == nil { first = connection } else { others[connection] = [] }
    }

    /// Whether `connection`'s events are held now.
    func holds(_ connection: Int) -> Bool {
        first == connection || (!others.isEmpty && others[connection] != nil)
    }

    /// Holds `event` for `connection`, which must be holding.
    mutating func append(_ event: Event, for connection: Int) {
        if first == connection { firstEvents.append(event) } else { others[connection]?.append(event) }
    }

    /// The command from `connection` replied: what was held for it, to send now.
    mutating func end(_ connection: Int) -> [Event] {
        if first == connection {
            first = nil
            defer { firstEvents = [] }
            return firstEvents
        }
        let events = others.removeValue(forKey: connection) ?? []
        if others.isEmpty { others = [:] }
        return events
    }

    /// Forgets everything (the session ended).
    mutating func removeAll() {
        self = HeldEvents()
    }
}
