import Foundation
import Observation

/// A session as an `@Observable` model a SwiftUI view binds to: every view's latest
/// state, the presented alert, and the connection.
///
/// ```swift
/// @State var model = ViewlineModel(client: try await ViewlineClient.connect(to: .tcp(port: 7878)))
///
/// List(model.decoded("search", as: SearchState.self)?.results ?? [], id: \.name) { place in
///     Text(place.name)
/// }
/// .alert(model.alert?.title ?? "", isPresented: model.isAlertPresented) { … }
/// ```
///
/// Updates arrive on the main actor, in the order the server sent them: a view's
/// states never go back in `rev`.
@MainActor
@Observable
public final class ViewlineModel {
    /// Every view's latest state, by view name.
    public private(set) var views: [String: JSON] = [:]
    /// The alert presented now, if any.
    public private(set) var alert: Alert?
    /// Where the connection stands.
    public private(set) var connection: ConnectionState = .connected
    /// The `rev` of the last event applied.
    public private(set) var rev = 0
    /// The client the model sends through.
    @ObservationIgnored public let client: ViewlineClient
    @ObservationIgnored private var following: Task<Void, Never>?

    /// A model of `client`'s session, following its events from now on; the views
    /// shown before it was made are taken from the client.
    public init(client: ViewlineClient) async {
        self.client = client
        let events = await client.eventsFromNow()
        views = await client.views
        alert = await client.presentedAlert
        connection = await client.connection
        rev = await client.rev
        following = Task { [weak self] in
            for await event in events {
                guard let self else { return }
                self.apply(event)
            }
        }
    }

    isolated deinit {
        following?.cancel()
    }

    /// Applies one event (in order: the model follows one stream).
    func apply(_ event: ViewlineEvent) {
        switch event {
        case .display(let view, let state, let rev):
            guard rev > self.rev || views[view] == nil else { return }  // a replay of what the model has
            views[view] = state
            self.rev = max(self.rev, rev)
        case .alert(let presented):
            alert = presented
            rev = max(rev, presented.rev)
        case .dismiss(let id, let rev):
            if alert?.id == id { alert = nil }
            self.rev = max(self.rev, rev)
        case .bye:
            break
        case .connection(let state):
            connection = state
        }
    }

    /// A view's state decoded into the app's own type (`nil` before its first display,
    /// or when it does not decode).
    public func decoded<State: Decodable>(_ view: String, as type: State.Type = State.self) -> State? {
        guard let state = views[view] else { return nil }
        return try? JSONDecoder().decode(State.self, from: Data(state.encoded.utf8))
    }

    /// Sends a line as a person types it; returns the reply's result.
    @discardableResult
    public func send(_ line: String) async throws -> JSON {
        try await client.send(line)
    }
}
