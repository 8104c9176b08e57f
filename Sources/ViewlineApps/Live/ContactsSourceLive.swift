import Foundation
import ViewlineKit
import ViewlinePersistence

/// The remote contacts source: a built-in document, or a JSON file read again at every sync.
public struct ContactsSourceLive: ContactsSource {
    let file: String?
    let latency: Duration

    public init(file: String?, latency: Duration) {
        self.file = file
        self.latency = latency
    }

    public var name: String { file.map { "file:\($0)" } ?? "builtin" }

    public func fetch() async throws -> [Contact] {
        if latency > .zero { try await Task.sleep(for: latency) }
        guard let file else { return Self.builtin }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: file))
        } catch {
            throw ServiceError("sync", "cannot read \(file)")
        }
        do {
            return try JSONDecoder().decode([Contact].self, from: data)
        } catch {
            throw ServiceError("sync", "\(file) is not a JSON array of {name, phone, address}")
        }
    }

    public static let builtin: [Contact] = [
        Contact(name: "Ada Lovelace", phone: "+44 20 7946 0001", address: "12 St James's Square, London"),
        Contact(name: "Alan Turing", phone: "+44 161 496 0002", address: "Hollymeade, Wilmslow"),
        Contact(name: "Grace Hopper", phone: "+1 212 555 0103", address: "Arlington, Virginia"),
        Contact(name: "Katherine Johnson", phone: "+1 757 555 0104", address: "Hampton, Virginia"),
        Contact(name: "Linus Torvalds", phone: "+1 503 555 0105", address: "Portland, Oregon"),
        Contact(name: "Margaret Hamilton", phone: "+1 617 555 0106", address: "Cambridge, Massachusetts"),
        Contact(name: "Radia Perlman", phone: "+1 425 555 0107", address: "Redmond, Washington"),
        Contact(name: "Tim Berners-Lee", phone: "+41 22 555 0108", address: "CERN, Geneva"),
    ]
}
