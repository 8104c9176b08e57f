import ViewlineClient

/// The app's own types for the search view's state: decoded on demand.
struct Place: Decodable, Hashable {
    var name: String
    var rating: Double
}

struct SearchState: Decodable {
    var query: String
    var loading: Bool
    var results: [Place]
}

/// What the search screen shows and does, from the session's model.
@MainActor
struct SearchScreen {
    let model: ViewlineModel

    var places: [Place] { model.decoded("search", as: SearchState.self)?.results ?? [] }
    var isLoading: Bool { model.decoded("search", as: SearchState.self)?.loading ?? false }
    var alert: Alert? { model.alert }

    func search(_ text: String) async throws {
        try await model.client.send("search", arguments: ["query": .string(text)])
    }

    func logIn(user: String, password: String) async throws {
        try await model.client.send("login", arguments: ["user": .string(user), "password": .string(password)])
    }
}
