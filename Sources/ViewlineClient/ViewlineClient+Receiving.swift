import Foundation
import NIOCore

/// What the client does with what arrives: replies to the commands waiting for
/// them, events to the waits and subscribers, and a lost connection resumed
/// (``ViewlineClient/Options`` says how).
extension ViewlineClient {
    func receive(_ text: [UInt8], on connection: LineConnection) {
        guard connection === line, let message = try? JSON.parse(text, limits: .serverMessage) else { return }
        heard = .now
        for continuation in messageSubscribers.values { continuation.yield(message) }
        let type = message["type"]?.stringValue
        if type != "reply", let rev = message["rev"]?.intValue { self.rev = max(self.rev, rev) }
        switch type {
        case "welcome":
            welcomeWaiter?.resume(returning: message)
            welcomeWaiter = nil
        case "reply":
            observeReply(message)
            guard let id = message["re"]?.intValue, let entry = pending.removeValue(forKey: id) else { return }
            entry.timer.cancel()
            entry.continuation.resume(returning: message)
        case "display":
            guard let view = message["view"]?.stringValue, let state = message["state"] else { return }
            views[view] = state
            publish(.display(view: view, state: state, rev: message["rev"]?.intValue ?? 0))
        case "alert":
            let alert = Alert(message, client: self)
            presentedAlert = alert
            publish(.alert(alert))
        case "dismiss":
            guard let id = message["id"]?.stringValue else { return }
            if presentedAlert?.id == id { presentedAlert = nil }
            publish(.dismiss(id: id, rev: message["rev"]?.intValue ?? 0))
        case "bye":
            let said = Bye(Bye.Code(rawValue: message["code"]?.stringValue ?? "shutdown"), message["reason"]?.stringValue ?? "")
            bye = said
            if Bye.isFinal(code: message["code"]?.stringValue, reason: said.reason) { ended = true }
            failWelcome(ConnectionClosed(message: "the server refused the connection: \(said.reason)", bye: said, sessionEnded: false))
            publish(.bye(said))
        default:
            break
        }
    }

    /// What a successful reply says about the presented alert: answered (its `dismiss`
    /// comes after the reply, and the next alert may come before it), or to be
    /// presented again by an `attach`'s snapshot (PROTOCOL §2.1, §5). Late replies too.
    func observeReply(_ message: JSON) {
        guard message["ok"]?.boolValue == true, let result = message["result"] else { return }
        if result["snapshot"]?.boolValue == true, result["replayed"] != nil {
            // An attach answered with a snapshot (another session, or one restored from
            // its record): every view and the alert come again, numbered after the
            // reply's `rev`, so nothing from before may linger — a resume must ask for
            // what comes after this session's revs, not another's.
            presentedAlert = nil
            views = [:]
            rev = result["rev"]?.intValue ?? 0
        } else if let presented = presentedAlert, result["answer"] != nil, result["alert"]?.stringValue == presented.id {
            presentedAlert = nil
        }
    }

    /// Hands `event` to every `events()` reader, and to the oldest wait it is for,
    /// which takes it with the received events before it; kept for later otherwise.
    func publish(_ event: ViewlineEvent) {
        for continuation in subscribers.values { continuation.yield(event) }
        if let index = waiters.firstIndex(where: { $0.offer(event) }) {
            let waiter = waiters.remove(at: index)
            waiter.timer.cancel()
            received.removeAll()
        } else {
            received.append(event)
        }
    }

    func setConnection(_ state: ConnectionState) {
        guard connection != state else { return }
        connection = state
        publish(.connection(state))
    }

    /// `connection` closed: resume the session, or end.
    func connectionClosed(_ connection: LineConnection) async {
        guard connection === line else { return }
        line = nil
        failWelcome(
            ConnectionClosed(
                message: connection.failureDescription ?? "the server closed the connection before its welcome", bye: bye, sessionEnded: false))
        // One resume at a time: a second one would open a connection while the first
        // waits for its welcome, and the first wait would never end. The resume's own
        // `attach` on this connection fails now (not at its timeout), and the resume
        // tries again.
        guard !resuming else {
            for (id, entry) in pending where entry.isOwn {
                pending[id] = nil
                entry.timer.cancel()
                entry.continuation.resume(
                    throwing: ConnectionClosed(message: "the connection closed during the resume", bye: bye, sessionEnded: false))
            }
            return
        }
        guard options.reconnect, !ended, !session.isEmpty else {
            close(reason: bye.map { "the server said bye: \($0.reason)" } ?? "the connection closed")
            return
        }
        // A server answers every command it began before it says `bye` (PROTOCOL §4):
        // after one, the commands still pending never ran and go again once resumed.
        // Without one, a lost reply leaves a command's fate unknown.
        if bye == nil {
            for (id, entry) in pending where !entry.isOwn {
                pending[id] = nil
                entry.timer.cancel()
                entry.continuation.resume(
                    throwing: ConnectionClosed(
                        message: "the connection dropped before the reply; the command may or may not have run", bye: nil, sessionEnded: false))
            }
        }
        setConnection(.reconnecting)
        resuming = true
        await resume()
        resuming = false
    }

    /// Reconnects with backoff and attaches from the last rev seen: the same node
    /// first, then the other nodes; `moved` is followed.
    func resume() async {
        let candidates = [endpoint] + knownNodes.filter { $0 != endpoint }
        for attempt in 0..<(options.reconnectAttempts * candidates.count) {
            if ended { break }
            var target = candidates[attempt % candidates.count]
            hops: for _ in 0..<3 {
                do {
                    _ = try await open(target)
                    _ = try await request(
                        ["cmd": "attach", "args": ["token": .string(token), "lastRev": .int(rev)]], timeout: options.connectTimeout, isOwn: true)
                    // Closed right after the reply: attached to nothing; go on resuming.
                    guard line != nil else { break hops }
                    resumed += 1
                    bye = nil
                    setConnection(.connected)
                    for id in pending.keys.sorted() where !(pending[id]?.isOwn ?? true) {
                        line?.write(pending[id]!.line)  // never ran: sent again, in the order first sent
                    }
                    return
                } catch let error as ViewlineError where error.code == .moved && Self.next(after: error, from: target) != nil {
                    target = Self.next(after: error, from: target)!
                    continue hops
                } catch let error as ViewlineError where !Self.retryableAttach.contains(error.code) {
                    close(reason: "the session could not be resumed: \(error.message)")
                    return
                } catch {
                    break hops
                }
            }
            if attempt % candidates.count == candidates.count - 1 {
                try? await Task.sleep(for: options.backoff(attempt / candidates.count))
            }
        }
        close(reason: "the session could not be resumed: no node answered")
    }

    /// Where a `moved` sends a client that came to `target`: the owner's line port, or
    /// its page's WebSocket for a client on a WebSocket.
    static func next(after moved: ViewlineError, from target: Endpoint) -> Endpoint? {
        target.webSocketPath == nil ? moved.address : moved.webAddress
    }

    /// What `attach` may answer while a session is still being handed over.
    static let retryableAttach: Set<ErrorCode> = [.moved, .unavailable, .serverBusy, ErrorCode(rawValue: "attach_throttled")]

    func close(reason: String) {
        ended = true
        pinger?.cancel()
        line?.close()
        line = nil
        let sessionEnded = bye?.code.isFinal ?? false
        for (_, entry) in pending {
            entry.timer.cancel()
            entry.continuation.resume(throwing: ConnectionClosed(message: reason, bye: bye, sessionEnded: sessionEnded))
        }
        pending = [:]
        failWelcome(ConnectionClosed(message: reason, bye: bye, sessionEnded: sessionEnded))
        if case .disconnected = connection {} else { setConnection(.disconnected(reason: reason)) }
        for waiter in waiters {
            waiter.timer.cancel()
            waiter.fail(ConnectionClosed(message: reason, bye: bye, sessionEnded: sessionEnded))
        }
        waiters = []
        for continuation in subscribers.values { continuation.finish() }
        subscribers = [:]
        for continuation in messageSubscribers.values { continuation.finish() }
        messageSubscribers = [:]
    }
}
