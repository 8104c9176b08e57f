import Logging
import Todos
import ViewlineApps
import ViewlineKit

// A to-do server with Viewline's search flow next to it:
//   swift run todo-server [port]     then: nc 127.0.0.1 7879
var configuration = ServerConfiguration()
configuration.port = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 7879

var services = Services()
services.todoStore = TodoFile(path: "todos.json")
services.places = PlacesServiceLive(latency: .zero)

let server = try await ViewlineServer(apps: [Todos.self, Search.self], services: services, configuration: configuration)
print("listening on \(server.localAddress.host):\(server.localAddress.port)")
try await server.run()
