import ViewlineKit

/// A to-do list served remotely: add, check off and delete items; a delete can be
/// undone from an alert; every change is saved in the background.
public enum Todos: ViewModel {
    /// What the client is shown: `{items:[{id, title, done}], filter, hasMore, saving}`,
    /// the items that match the filter, a page at a time.
    public struct State: Encodable, Sendable, Equatable {
        /// Every item, in order.
        public var items: [Todo] = []
        /// Only items whose title contains it (any case) are shown; `""` shows all.
        public var filter = ""
        public var saving = false
        /// How many matching items are shown (`more` shows another page; not sent).
        var shown = Todos.pageSize
        /// The next item's id (not shown).
        var nextID = 1

        /// The items the client sees.
        public var visible: ArraySlice<Todo> { matching.prefix(shown) }
        var matching: [Todo] { filter.isEmpty ? items : items.filter { $0.title.lowercased().contains(filter.lowercased()) } }

        enum CodingKeys: String, CodingKey { case items, filter, hasMore, saving }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(Array(visible), forKey: .items)
            try container.encode(filter, forKey: .filter)
            try container.encode(matching.count > shown, forKey: .hasMore)
            try container.encode(saving, forKey: .saving)
        }
    }

    /// How many items a page shows.
    public static let pageSize = 10

    public static let view = "todos"
    public static let stateSummary = "{items:[{id, title, done}], filter, hasMore, saving}"
    public static let busyFields = ["saving"]
    public static func initialState(_ services: Services) -> State { State() }
    public static let backends: [any BackendKey.Type] = [TodoStoreKey.self]
    public static let errors = [ErrorCode.noSuchTodo]

    // The commands' arguments, declared once: each command lists the ones it takes
    // and reads them through the same tokens (`args[Todos.title]`), typed.
    static let title = ArgumentKey.text("title")
    static let id = ArgumentKey.word("id")
    static let filterText = ArgumentKey.optionalText("text").described("part of a title")

    public static let commands: [Command<Todos>] = [
        Command("add", summary: "Add a to-do item.", arguments: [title.argument], example: "add buy milk", primary: true) { session, args in
            let item = session.update { state in
                let item = Todo(id: state.nextID, title: args[Todos.title], done: false)
                state.nextID += 1
                state.items.append(item)
                return item
            }
            save(in: session)
            return ["id": .int(item.id)]
        },
        Command("done", summary: "Check an item off.", arguments: [id.argument], example: "done 1") { session, args in
            let index = try position(of: args[Todos.id], in: session)
            session.update { $0.items[index].done = true }
            save(in: session)
            return ["done": true]
        },
        // Filtering runs in the command itself, so the latest keystroke's filter is
        // always the one shown: a page may send it as the person types.
        Command(
            "filter", summary: "Show only the items whose title contains the text (any case); no text shows them all.",
            arguments: [filterText.argument], example: "filter milk", live: true
        ) { session, args in
            let shown = session.update { state in
                state.filter = args[Todos.filterText] ?? ""
                state.shown = pageSize
                return state.visible.count
            }
            return ["shown": .int(shown)]
        },
        Command("more", summary: "Show the next page of items.", paging: true) { session, _ in
            let shown = session.update { state in
                state.shown += pageSize
                return state.visible.count
            }
            return ["shown": .int(shown)]
        },
        Command("delete", summary: "Delete an item; an alert offers to undo it.", arguments: [id.argument], example: "delete 1") { session, args in
            let index = try position(of: args[Todos.id], in: session)
            let item = session.update { $0.items.remove(at: index) }
            save(in: session)
            session.run(TaskSlot("undo-\(item.id)")) { session in
                guard case .confirmed = await session.ask(undoAlert(for: item)) else { return }
                session.update { state in
                    state.items.insert(item, at: min(index, state.items.count))
                }
                save(in: session)
            }
            return ["deleted": .int(item.id)]
        },
    ]

    /// "Deleted …. Undo?" with Undo (confirm) and Keep deleted (cancel).
    public static func undoAlert(for item: Todo) -> AlertContent {
        AlertContent(title: "Deleted", message: "Deleted \"\(item.title)\". Undo?", actions: [.confirm("Undo"), .cancel("Keep deleted")])
    }

    /// Saves the list in the background: the latest save wins, and `saving` never
    /// sticks, whether the save succeeds, fails (an alert says so) or is replaced.
    static func save(in session: isolated ViewSession<Todos>) {
        let items = session.state.items
        session.update { $0.saving = true }
        session.run(.saveTodos) { session in
            do {
                // A newer save replaced this one: the runtime drops what it shows.
                try await session.call(TodoStoreKey.self, with: items) { store in try await store.save(items) }
                session.update { $0.saving = false }
            } catch {
                session.update { $0.saving = false }
                session.showAlert(.error("Saving the list failed: \(ServiceError.describe(error))"))
            }
        }
    }

    static func position(of id: String, in session: isolated ViewSession<Todos>) throws(ProtocolError) -> Int {
        guard let number = Int(id), let index = session.state.items.firstIndex(where: { $0.id == number }) else {
            throw ProtocolError(.noSuchTodo, "there is no item \(id); state todos lists them")
        }
        return index
    }
}

extension Todos {
    /// What a session record keeps of the list: all a restore needs, the page shown
    /// and the next id included, which the client's state leaves out.
    public struct Recorded: Codable, Sendable, Equatable {
        var items: [Todo]
        var filter: String
        var shown: Int
        var nextID: Int
    }

    /// Version 2 keeps the filter and the page too (version 1 kept the items and the
    /// next id); a record of version 1 comes back with no filter, on the first page.
    public static let record: StateRecord<State>? = StateRecord.codable(
        as: Recorded.self, version: 2,
        record: { Recorded(items: $0.items, filter: $0.filter, shown: $0.shown, nextID: $0.nextID) },
        restore: { State(items: $0.items, filter: $0.filter, shown: $0.shown, nextID: $0.nextID) }
    )
    .migrating(from: 1) { state in
        state["filter"] = ""
        state["shown"] = .int(Todos.pageSize)
    }
}

/// One item of the list.
public struct Todo: Codable, Sendable, Equatable {
    public var id: Int
    public var title: String
    public var done: Bool

    public init(id: Int, title: String, done: Bool) {
        self.id = id
        self.title = title
        self.done = done
    }
}

extension TaskSlot {
    static let saveTodos = TaskSlot("save-todos")
}

extension ErrorCode {
    /// `done` or `delete` named an item that is not on the list.
    public static let noSuchTodo = ErrorCode("no_such_todo", meaning: "The item id is not on the list.")
}
