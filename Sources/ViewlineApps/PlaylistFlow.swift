import ViewlineKit

/// The step the playlist flow is at; shown to clients as the view's `step`.
public enum PlaylistStep: String, Sendable, Equatable, CaseIterable, Encodable {
    /// Nothing started yet.
    case idle
    /// The token is missing or expired: the login alert is up and the next task is reserved.
    case awaitingLogin
    /// Logging in failed: the reserved task waits for the next `playlist`.
    case loginFailed
    /// A page fetch is running.
    case fetching
    /// A page is shown and the next page is reserved for `more`.
    case ready
    /// A fetch failed: the task stays reserved so `more` or `playlist` retries it.
    case failed
    /// Every page is shown; nothing is reserved.
    case complete
    /// The login was cancelled and the reserved task dropped.
    case cancelled
}

/// The playlist flowchart as a state machine (seed 003's "class that manages the
/// flowchart"): validate the token, else ask for login and reserve the next task;
/// after login the reserved task runs; pagination reserves "fetch next page" until
/// there is no more. It decides; the session carries out the returned ``Action``.
public struct PlaylistFlow: Sendable, Equatable {
    /// A unit of work the flow can hold back until it can run.
    public enum Reserved: Sendable, Equatable {
        case fetchPage(offset: Int)
    }

    /// What the session has to do next.
    public enum Action: Sendable, Equatable {
        case askForLogin
        case fetchPage(offset: Int)
    }

    public static let pageSize = 10

    public private(set) var step: PlaylistStep = .idle
    public private(set) var reserved: Reserved?
    public private(set) var items: [PlaylistItem] = []
    public private(set) var total: Int?

    public init() {}

    public var hasMore: Bool { total.map { items.count < $0 } ?? false }
    public var isBusy: Bool { step == .fetching || step == .awaitingLogin }

    /// `playlist`: resumes a task held back by a failed login or fetch; otherwise
    /// starts over from the first page.
    public mutating func start(tokenValid: Bool) throws(ProtocolError) -> Action {
        guard !isBusy else { throw ProtocolError(.busy, "the playlist is already \(step == .fetching ? "loading" : "waiting for login")") }
        if reserved == nil || !(step == .loginFailed || step == .failed) {
            items = []
            total = nil
            reserved = .fetchPage(offset: 0)
        }
        return runReserved(tokenValid: tokenValid)
    }

    /// `more`: runs the reserved next-page task.
    public mutating func more(tokenValid: Bool) throws(ProtocolError) -> Action {
        guard !isBusy else { throw ProtocolError(.busy, "the playlist is already \(step == .fetching ? "loading" : "waiting for login")") }
        guard reserved != nil else {
            throw ProtocolError(.nothingPending, step == .complete ? "the whole playlist is shown" : "nothing is pending; start with playlist")
        }
        return runReserved(tokenValid: tokenValid)
    }

    /// The login asked for succeeded: the reserved task runs by itself.
    public mutating func loginSucceeded() -> Action? {
        guard step == .awaitingLogin, reserved != nil else { return nil }
        return runReserved(tokenValid: true)
    }

    /// The login failed: keep the task reserved for the next `playlist`.
    public mutating func loginFailed() {
        if step == .awaitingLogin { step = .loginFailed }
    }

    /// The login was cancelled: drop the reserved task.
    public mutating func loginCancelled() {
        guard step == .awaitingLogin else { return }
        reserved = nil
        step = .cancelled
    }

    /// A page arrived: append what is new, reserve the next page if there is one.
    public mutating func pageLoaded(offset: Int, _ page: PlaylistPage) {
        guard step == .fetching, reserved == .fetchPage(offset: offset) else { return }
        let known = Set(items.map(\.position))
        items.append(contentsOf: page.items.filter { !known.contains($0.position) })
        total = page.total
        if items.count < page.total && !page.items.isEmpty {
            reserved = .fetchPage(offset: items.count)
            step = .ready
        } else {
            total = items.count
            reserved = nil
            step = .complete
        }
    }

    /// A fetch failed: the same task stays reserved.
    public mutating func pageFailed() {
        if step == .fetching { step = .failed }
    }

    private mutating func runReserved(tokenValid: Bool) -> Action {
        guard tokenValid else {
            step = .awaitingLogin
            return .askForLogin
        }
        switch reserved {
        case .fetchPage(let offset)?:
            step = .fetching
            return .fetchPage(offset: offset)
        case nil:
            preconditionFailure("runReserved needs a reserved task")
        }
    }
}

/// On the wire the flow is its view: `{items, hasMore, loading, step}`.
extension PlaylistFlow: Encodable {
    enum CodingKeys: String, CodingKey { case items, hasMore, loading, step }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(items, forKey: .items)
        try container.encode(hasMore, forKey: .hasMore)
        try container.encode(step == .fetching, forKey: .loading)
        try container.encode(step, forKey: .step)
    }
}
