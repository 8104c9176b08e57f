import ViewlineClient

/// What the REPL shows of what a ``ClientBridge`` heard, in the order it came on the
/// wire: a command's reply where it arrived among the events (not when the client
/// handed it over), and the client's own requests (the `attach` of a resume, a
/// keepalive `ping`) told apart from the user's.
struct ServerFeed {
    /// What to show next.
    enum Output {
        /// A message from the server: an event, or the reply to the user's command.
        case message(JSON)
        /// The reply to a request of the client's own (a resume's `attach`, a keepalive).
        case ownReply(JSON)
        /// The connection's state changed.
        case connection(ConnectionState)
        /// The user's command got no reply (the connection dropped without a `bye`, or
        /// the client was closed).
        case unanswered(any Error)
        /// The client is closed: nothing more comes.
        case finished
    }

    private var items = Queue()
    private var answers: [Int: Result<JSON, any Error>] = [:]
    /// The user's command waiting for its reply.
    private(set) var awaiting: Int?

    /// A command was sent: its reply is the user's, not the client's.
    mutating func await(_ request: Int) {
        awaiting = request
    }

    /// Takes what the bridge heard.
    mutating func append(_ heard: [ClientBridge.Item]) {
        for item in heard {
            if case .answered(let request, let result) = item {
                answers[request] = result  // matched to its reply by the reply's `re`
            } else {
                items.append(item)
            }
        }
    }

    /// The next thing to show, or `nil` until more is heard. Clears ``awaiting`` once
    /// the awaited command's reply (or its failure) has been given out.
    mutating func next() -> Output? {
        // A loop, not recursion: a server may send any number of welcomes in a row.
        while true {
            if let output = step() { return output }
            if items.isEmpty || awaitingReplyBlocks { return nil }
        }
    }

    /// Whether the first item is a reply still waiting for its answer to be handed over.
    private var awaitingReplyBlocks: Bool {
        guard case .message(let message)? = items.first, message["type"] == "reply", let request = awaiting else { return false }
        return answers[request] == nil
    }

    /// One step of ``next()``: an output, or `nil` when the first item was dropped (or
    /// nothing can be given out yet).
    private mutating func step() -> Output? {
        guard let first = items.first else {
            // No reply will come for a command that failed outright.
            if let request = awaiting, case .failure(let error)? = answers[request] {
                answers[request] = nil
                awaiting = nil
                return .unanswered(error)
            }
            return nil
        }
        switch first {
        case .message(let message) where message["type"] == "reply":
            guard let request = awaiting else {
                items.removeFirst()
                return .ownReply(message)
            }
            // The client hands a reply over just after it passes it on: wait for that.
            guard let answer = answers[request] else { return nil }
            items.removeFirst()
            if case .success(let reply) = answer, reply["re"] == message["re"] {
                answers[request] = nil
                awaiting = nil
                return .message(message)
            }
            return .ownReply(message)
        case .message(let message) where message["type"] == "welcome":
            items.removeFirst()  // a connection the client opened to resume: its session is not ours
            return nil
        case .message(let message):
            items.removeFirst()
            return .message(message)
        case .connection(let state):
            items.removeFirst()
            return .connection(state)
        case .finished:
            items.removeFirst()
            if let request = awaiting, case .failure(let error)? = answers[request] {
                answers[request] = nil
                awaiting = nil
                items.putBack(.finished)
                return .unanswered(error)
            }
            return .finished
        case .answered:
            items.removeFirst()  // never queued (``append(_:)`` keeps answers apart)
            return nil
        }
    }
}

extension ServerFeed {
    /// What was heard and not yet shown, first in first out: taking the first costs
    /// the same however many wait (a server may send a million lines in a burst).
    fileprivate struct Queue {
        private var storage: [ClientBridge.Item] = []
        private var head = 0

        var first: ClientBridge.Item? { head < storage.count ? storage[head] : nil }
        var isEmpty: Bool { head >= storage.count }

        mutating func append(_ item: ClientBridge.Item) {
            storage.append(item)
        }

        mutating func removeFirst() {
            head += 1
            if head == storage.count {
                storage.removeAll(keepingCapacity: storage.count <= 1024)
                head = 0
            } else if head >= 1024, head * 2 >= storage.count {
                storage.removeFirst(head)
                head = 0
            }
        }

        /// Puts back the item just taken.
        mutating func putBack(_ item: ClientBridge.Item) {
            if head > 0 {
                head -= 1
                storage[head] = item
            } else {
                storage.insert(item, at: 0)
            }
        }
    }
}
