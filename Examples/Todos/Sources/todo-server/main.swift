import Foundation
import Logging
import Todos
import ViewlineApps
import ViewlineKit

// A to-do server with Viewline's search flow next to it:
//   swift run todo-server [port] [web-port] [--admin]     then: nc 127.0.0.1 7879
//   and open http://127.0.0.1:8079/ (the page renders the view-models; no front-end code);
//   with --admin, the inspector at http://127.0.0.1:8079/inspect and `export <session>`
var configuration = ServerConfiguration()
let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
configuration.port = arguments.first ?? 7879
configuration.webPort = arguments.dropFirst().first ?? 8079
configuration.admin = CommandLine.arguments.contains("--admin")

var services = Services()
services.todoStore = TodoFile(path: "todos.json")
services.places = PlacesServiceLive(latency: .zero)

let server = try ViewlineServer(apps: [Todos.self, Search.self], services: services, configuration: configuration)
async let serving: Void = server.run()  // binds, then serves
let address = try await server.listeningAddress
print("listening on \(address.host):\(address.port)")
if let web = server.webAddress { print("web on http://\(web.host):\(web.port)/") }
fflush(nil)  // the addresses reach a script reading through a pipe now, not at exit
try await serving
