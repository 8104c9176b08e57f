import Foundation
import Testing
import ViewlineKit
import ViewlineTesting

/// A view's state may hold what Swift encodes through nested containers: an enum
/// with associated values, a `Decimal`. It displays, answers `state`, and reads back
/// as itself (a server with such a state used to stop at its first display).
@Suite struct EnumStateTests {
    enum Basket: ViewModel {
        enum Phase: Codable, Sendable, Equatable {
            case empty
            case filled(items: [String], total: Decimal)
            case failed(String)
        }

        struct State: Codable, Sendable, Equatable {
            var phase = Phase.empty
        }

        static let view = "basket"
        static let stateSummary = "{phase}"
        static func initialState(_ services: Services) -> State { State() }

        static let commands: [Command<Basket>] = [
            Command("fill", summary: "Put one item in at a price.", arguments: [.word("item"), .word("price")]) { session, args in
                guard let price = Decimal(string: args.string("price")) else { throw ProtocolError(.badArguments, "a price") }
                session.update { $0.phase = .filled(items: [args.string("item")], total: price) }
                return nil
            },
            Command("fail", summary: "Show a failure.") { session, _ in
                session.update { $0.phase = .failed("out of stock") }
                return nil
            },
        ]
    }

    @Test(arguments: TestStore.Mode.allCases) func anEnumWithAssociatedValuesDisplaysAndReadsBack(mode: TestStore.Mode) async throws {
        let store = try await TestStore(apps: [Basket.self], services: Services(), mode: mode)
        await store.send("fill tea 3.10")
        await store.receive(Basket.self) { $0.phase = .filled(items: ["tea"], total: Decimal(string: "3.10")!) }
        let state = try #require(try await store.send("state basket")?.get())
        #expect(state.encoded == #"{"view":"basket","state":{"phase":{"filled":{"items":["tea"],"total":3.1}}}}"#)
        await store.send("fail")
        await store.receive(Basket.self) { $0.phase = .failed("out of stock") }
        await store.finish()
    }
}
