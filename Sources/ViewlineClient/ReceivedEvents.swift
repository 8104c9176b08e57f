/// The events a client received that nothing has taken yet, oldest first: what a wait
/// (`waitForDisplay`, `waitForAlert`) and a new `events()` reader read before what
/// arrives. At most `limit` are kept; past it the oldest go first.
struct ReceivedEvents {
    private var items: [ViewlineEvent] = []
    /// Where the oldest kept event is in `items` (those before it were taken).
    private var head = 0
    let limit: Int

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    var count: Int { items.count - head }

    /// Keeps `event`, pushing out the oldest when full.
    mutating func append(_ event: ViewlineEvent) {
        guard limit > 0 else { return }
        if count == limit { head += 1 }
        items.append(event)
        compact()
    }

    /// Takes every event (oldest first).
    mutating func takeAll() -> [ViewlineEvent] {
        defer { removeAll() }
        return Array(items[head...])
    }

    /// Forgets every event.
    mutating func removeAll() {
        items.removeAll(keepingCapacity: true)
        head = 0
    }

    /// The first event `extract` gives a value for, taken with every event before it;
    /// nothing is taken when none does.
    mutating func takeFirst<Value>(_ extract: (ViewlineEvent) -> Value?) -> Value? {
        for index in head..<items.count {
            guard let value = extract(items[index]) else { continue }
            head = index + 1
            compact()
            return value
        }
        return nil
    }

    /// Takes the events up to and including the last one `matches` (nothing when none does).
    mutating func takeThroughLast(where matches: (ViewlineEvent) -> Bool) {
        guard let index = items[head...].lastIndex(where: matches) else { return }
        head = index + 1
        compact()
    }

    /// Frees the room of taken events once they are half of what is held.
    private mutating func compact() {
        if head == items.count {
            removeAll()
        } else if head >= 64, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}
