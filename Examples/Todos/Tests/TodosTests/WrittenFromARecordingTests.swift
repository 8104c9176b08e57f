// swift-format-ignore-file
// (written by `viewline --test-from`: one step a line, however long)
import Foundation
import Testing
import Todos
import ViewlineKit
import ViewlineTesting

// Written by `viewline --test-from Recordings/undo.jsonl --apps Todos` (the name
// changed): the recorded session as send/receive steps to read and edit. The same
// session replays exactly in TodosTests.theRecordedUndoSessionStillPlaysTheSame.

/// Written by `viewline --test-from` from session s1, recorded on viewline/1.3 at 2026-12-03T00:09:53Z.
@Test func aTestWrittenFromTheRecordedUndoSessionPasses() async throws {
    var services = Services()
    // The services that are not backends (a store, a clock), as the recorded server had them.
    let test = TestStore(apps: [Todos.self], services: services, answeringCalls: true)
    await test.send(#"{"cmd":"add","args":{"title":"buy milk"}}"#, reply: try JSON.parse(#"{"id":1}"#))
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false}],"filter":"","hasMore":false,"saving":true}"#))
    test.answer(call: 1, "todo-store", asked: try JSON.parse(#"[{"done":false,"id":1,"title":"buy milk"}]"#), value: .null)
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false}],"filter":"","hasMore":false,"saving":false}"#))
    await test.send(#"{"cmd":"add","args":{"title":"walk the dog"}}"#, reply: try JSON.parse(#"{"id":2}"#))
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false},{"id":2,"title":"walk the dog","done":false}],"filter":"","hasMore":false,"saving":true}"#))
    test.answer(call: 2, "todo-store", asked: try JSON.parse(#"[{"done":false,"id":1,"title":"buy milk"},{"done":false,"id":2,"title":"walk the dog"}]"#), value: .null)
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false},{"id":2,"title":"walk the dog","done":false}],"filter":"","hasMore":false,"saving":false}"#))
    await test.send(#"{"cmd":"done","args":{"id":"2"}}"#, reply: try JSON.parse(#"{"done":true}"#))
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false},{"id":2,"title":"walk the dog","done":true}],"filter":"","hasMore":false,"saving":true}"#))
    test.answer(call: 3, "todo-store", asked: try JSON.parse(#"[{"done":false,"id":1,"title":"buy milk"},{"done":true,"id":2,"title":"walk the dog"}]"#), value: .null)
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false},{"id":2,"title":"walk the dog","done":true}],"filter":"","hasMore":false,"saving":false}"#))
    await test.send(#"{"cmd":"delete","args":{"id":"1"}}"#, reply: try JSON.parse(#"{"deleted":1}"#))
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":2,"title":"walk the dog","done":true}],"filter":"","hasMore":false,"saving":true}"#))
    await test.receive(event: try JSON.parse(#"{"type":"alert","rev":8,"id":"a1","title":"Deleted","message":"Deleted \"buy milk\". Undo?","actions":[{"role":"confirm","label":"Undo"},{"role":"cancel","label":"Keep deleted"}]}"#))
    test.answer(call: 4, "todo-store", asked: try JSON.parse(#"[{"done":true,"id":2,"title":"walk the dog"}]"#), value: .null)
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":2,"title":"walk the dog","done":true}],"filter":"","hasMore":false,"saving":false}"#))
    await test.send(#"{"cmd":"confirm"}"#, reply: try JSON.parse(#"{"alert":"a1","answer":"confirm","action":"Undo"}"#))
    await test.receive(event: try JSON.parse(#"{"type":"dismiss","rev":10,"id":"a1"}"#))
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false},{"id":2,"title":"walk the dog","done":true}],"filter":"","hasMore":false,"saving":true}"#))
    test.answer(call: 5, "todo-store", asked: try JSON.parse(#"[{"done":false,"id":1,"title":"buy milk"},{"done":true,"id":2,"title":"walk the dog"}]"#), value: .null)
    await test.receiveDisplay("todos", state: try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false},{"id":2,"title":"walk the dog","done":true}],"filter":"","hasMore":false,"saving":false}"#))
    await test.send(#"{"cmd":"state","args":{"view":"todos"}}"#, reply: try JSON.parse(#"{"view":"todos","state":{"items":[{"id":1,"title":"buy milk","done":false},{"id":2,"title":"walk the dog","done":true}],"filter":"","hasMore":false,"saving":false}}"#))
    await test.finish()
}
