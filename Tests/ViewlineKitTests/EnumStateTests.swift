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

/// A state whose encoding throws is the app's bug: its view shows `{}` and the
/// server goes on (it used to stop every session).
@Suite struct FailingStateTests {
    enum Fragile: ViewModel {
        struct Unencodable: Error {}

        struct State: Encodable, Sendable, Equatable {
            var broken = false
            var count = 0
            func encode(to encoder: any Encoder) throws {
                if broken { throw Unencodable() }
                var container = encoder.container(keyedBy: Key.self)
                try container.encode(count, forKey: .count)
            }
            enum Key: CodingKey { case count }
        }

        static let view = "fragile"
        static let stateSummary = "{count}"
        static func initialState(_ services: Services) -> State { State() }

        static let commands: [Command<Fragile>] = [
            Command("break", summary: "Make the state fail to encode.") { session, _ in
                session.update { $0.broken = true }
                return nil
            },
            Command("mend", summary: "Make it encode again.") { session, _ in
                session.update {
                    $0.broken = false
                    $0.count += 1
                }
                return nil
            },
        ]
    }

    @Test func aStateThatFailsToEncodeShowsAnEmptyStateAndTheServerGoesOn() async throws {
        let store = TestStore(apps: [Fragile.self], services: Services(), exhaustive: false)
        _ = await store.send("break")
        _ = await store.send("ping")
        let state = try #require(try await store.send("state fragile")?.get())
        #expect(state.encoded == #"{"view":"fragile","state":{}}"#)
        _ = await store.send("mend")
        let mended = try #require(try await store.send("state fragile")?.get())
        #expect(mended.encoded == #"{"view":"fragile","state":{"count":1}}"#)
        #expect(store.recorder.displays("fragile").contains([:]))
    }
}
