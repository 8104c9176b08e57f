import NIOCore

extension Session {
    /// The fields a session holds only once it used them, apart from those every
    /// command touches: an idle session (connected, or detached after a command
    /// answered at once) holds none of them, only ``Session/occasional``'s word. Each
    /// reads its default until the first write makes them all. Touched only on the
    /// session's executor, and by its `deinit` once nothing else holds it.
    final class OccasionalFields: @unchecked Sendable {
        var restoredFromRecord = false
        var recordWindowStart: Duration?
        var recordsInWindow: UInt8 = 0
        var withheldWithoutLease = false
        var tokenChangeInFlight = false
        var tokenRecordAttempt = 0
        var recordRevFloor = 0
        var inspectorConnections: Set<Int> = []
        var nextAlertNumber = 1
        var morePendingDisplays: [Int] = []
        var queuedAlerts: [PendingAlert] = []
        var tasks: [TaskSlot: (generation: Int, task: Task<Void, Never>)] = [:]
        var taskGeneration = 0
        var settleWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        var nextWaiterID = 0
        var observations: [ObjectIdentifier: @Sendable () -> Void] = [:]
        var user: String?
        var awaiting: [Int: JSON] = [:]
        var presentedAlert: PendingAlert?
    }

    /// ``occasional``, made now if it was not yet.
    private var madeOccasional: OccasionalFields {
        if let occasional { return occasional }
        let made = OccasionalFields()
        occasional = made
        return made
    }

    /// Set on a session restored from a cluster record until its first attach: the
    /// client's revs came from another node, so it gets a snapshot numbered after them.
    var restoredFromRecord: Bool {
        get { occasional?.restoredFromRecord ?? false }
        _modify { yield &madeOccasional.restoredFromRecord }
    }
    /// When the current window of records began (cluster only: see
    /// ``recordIfDue(now:window:burst:maximumBytes:)``), from ``recordWindowEpoch``.
    var recordWindowStart: Duration? {
        get { occasional?.recordWindowStart }
        _modify { yield &madeOccasional.recordWindowStart }
    }
    /// What ``recordWindowStart`` counts from.
    static let recordWindowEpoch = ContinuousClock.now
    /// Records taken for writing in the current window.
    var recordsInWindow: UInt8 {
        get { occasional?.recordsInWindow ?? 0 }
        _modify { yield &madeOccasional.recordsInWindow }
    }
    /// Output was withheld while this node held no valid lease: once the lease is back
    /// and the session is still this node's, every view is sent again.
    var withheldWithoutLease: Bool {
        get { occasional?.withheldWithoutLease ?? false }
        _modify { yield &madeOccasional.withheldWithoutLease }
    }
    /// `end-others` is recording a new token (see ``beginTokenChange()``).
    var tokenChangeInFlight: Bool {
        get { occasional?.tokenChangeInFlight ?? false }
        _modify { yield &madeOccasional.tokenChangeInFlight }
    }
    /// The rev the last `end-others` record was written at (``recordForTokenChange()``).
    var tokenRecordAttempt: Int {
        get { occasional?.tokenRecordAttempt ?? 0 }
        _modify { yield &madeOccasional.tokenRecordAttempt }
    }
    /// Records are written at this rev at least (``tokenRecordFailed(at:)``).
    var recordRevFloor: Int {
        get { occasional?.recordRevFloor ?? 0 }
        _modify { yield &madeOccasional.recordRevFloor }
    }
    /// The connections that gave the inspector token (`inspector`): they may run the
    /// inspector's commands while they stay on this session.
    var inspectorConnections: Set<Int> {
        get { occasional?.inspectorConnections ?? [] }
        _modify { yield &madeOccasional.inspectorConnections }
    }
    /// The number the next alert gets (see Session+Alerts.swift).
    var nextAlertNumber: Int {
        get { occasional?.nextAlertNumber ?? 1 }
        _modify { yield &madeOccasional.nextAlertNumber }
    }
    /// Views waiting to be displayed after ``pendingDisplay``, in order.
    var morePendingDisplays: [Int] {
        get { occasional?.morePendingDisplays ?? [] }
        _modify { yield &madeOccasional.morePendingDisplays }
    }
    /// Alerts waiting behind the presented one.
    var queuedAlerts: [PendingAlert] {
        get { occasional?.queuedAlerts ?? [] }
        _modify { yield &madeOccasional.queuedAlerts }
    }
    /// Background work by slot (see Session+Tasks.swift).
    var tasks: [TaskSlot: (generation: Int, task: Task<Void, Never>)] {
        get { occasional?.tasks ?? [:] }
        _modify { yield &madeOccasional.tasks }
    }
    var taskGeneration: Int {
        get { occasional?.taskGeneration ?? 0 }
        _modify { yield &madeOccasional.taskGeneration }
    }
    /// Callers waiting for the session's work to settle.
    var settleWaiters: [Int: CheckedContinuation<Bool, Never>] {
        get { occasional?.settleWaiters ?? [:] }
        _modify { yield &madeOccasional.settleWaiters }
    }
    var nextWaiterID: Int {
        get { occasional?.nextWaiterID ?? 0 }
        _modify { yield &madeOccasional.nextWaiterID }
    }
    /// How to stop each followed observation.
    var observations: [ObjectIdentifier: @Sendable () -> Void] {
        get { occasional?.observations ?? [:] }
        _modify { yield &madeOccasional.observations }
    }
    /// Who is logged in (see Session+User.swift).
    package internal(set) var user: String? {
        get { occasional?.user }
        _modify { yield &madeOccasional.user }
    }
    /// The id of each connection's awaiting command (a connection runs one at a time):
    /// a connection is never told `bye` before the reply to a command that began, so a
    /// client may send again, on its resumed connection, any line not answered before
    /// a `bye` (PROTOCOL §4).
    var awaiting: [Int: JSON] {
        get { occasional?.awaiting ?? [:] }
        _modify { yield &madeOccasional.awaiting }
    }
    /// The alert shown now (see Session+Alerts.swift).
    var presentedAlert: PendingAlert? {
        get { occasional?.presentedAlert }
        _modify { yield &madeOccasional.presentedAlert }
    }
}
