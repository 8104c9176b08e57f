/// The commands a server understands, in the order `help` lists them, looked up
/// by name case-insensitively. Built once per server from its declarations.
public struct CommandTable: Sendable {
    /// Every command, in `help` order.
    public let all: [CommandSpec]
    private let byName: [String: Int]
    /// Every name by its bytes: see ``index(ofName:)``.
    private let names: NameTable
    /// Each command's name when it takes no argument (`nil` otherwise): a line of its
    /// name alone (`ping`) becomes a request without its declaration being copied
    /// out of ``all`` (a copy retains each of the declaration's strings and arrays,
    /// which every connection shares).
    private let bareNames: [String?]

    /// - Precondition: no two commands share a name.
    public init(_ specs: [CommandSpec]) {
        all = specs
        byName = Dictionary(specs.indices.map { (specs[$0].name, $0) }) { first, _ in
            preconditionFailure("two commands are named \"\(specs[first].name)\"")
        }
        names = NameTable(specs.map(\.name))
        bareNames = specs.map { $0.arguments.isEmpty ? $0.name : nil }
    }

    /// The command called `name`, in any case; `nil` when there is none.
    public func spec(named name: String) -> CommandSpec? {
        index(named: name).map { all[$0] }
    }

    /// The position in ``all`` of the command called `name` (in any case).
    public func index(named name: String) -> Int? {
        // Names are lowercase ASCII: a name already in that form skips Unicode lowercasing.
        if name.utf8.allSatisfy({ $0 < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) { return byName[name] }
        return byName[name.lowercased()]
    }

    /// The position in ``all`` of the command whose name is `bytes`, ASCII letters
    /// in any case, found without making or hashing a `String`: how an inline line's
    /// first word is looked up. `nil` when no name matches, or when the bytes are not
    /// all ASCII (``index(named:)`` then decides, with Unicode lowercasing).
    public func index(ofName bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        names.index(of: bytes)
    }

    func lookup(_ name: String) throws(ProtocolError) -> (index: Int, spec: CommandSpec) {
        guard let index = index(named: name) else {
            throw ProtocolError(.unknownCommand, "unknown command \"\(name)\"; try help")
        }
        return (index, all[index])
    }

    /// Builds a request from a command name and JSON arguments (the JSON form).
    public func request(id: JSON = .null, name: String, args: JSONObject) throws(ProtocolError) -> Request {
        let (index, spec) = try lookup(name)
        return Request(id: id, command: index, name: spec.name, arguments: try spec.check(args))
    }

    /// Builds a request for the command at `index` in ``all`` from the inline words
    /// after its name.
    public func request(command index: Int, words: some Collection<String>) throws(ProtocolError) -> Request {
        if words.isEmpty, let name = bareNames[index] { return Request(id: .null, command: index, name: name, arguments: Arguments()) }
        let spec = all[index]
        return Request(id: .null, command: index, name: spec.name, arguments: try spec.check(try spec.inlineArguments(Array(words))))
    }

    /// Maps inline words to the command's name and JSON `args`, without checking
    /// the values: what the shared test vectors record for each line.
    public func inlineArguments(words: [String]) throws(ProtocolError) -> (name: String, args: JSONObject) {
        let (_, spec, args) = try inlineParts(words)
        return (spec.name, args)
    }

    /// Builds a request from inline words (the first is the command name).
    public func request(words: [String]) throws(ProtocolError) -> Request {
        let (index, spec, args) = try inlineParts(words)  // one lookup: the same spec maps and checks
        return Request(id: .null, command: index, name: spec.name, arguments: try spec.check(args))
    }

    private func inlineParts(_ words: [String]) throws(ProtocolError) -> (index: Int, spec: CommandSpec, args: JSONObject) {
        guard let name = words.first else { throw ProtocolError(.unknownCommand, "empty command") }
        let (index, spec) = try lookup(name)
        return (index, spec, try spec.inlineArguments(Array(words.dropFirst())))
    }
}

/// Command names in a small open-addressing table keyed by a hash of their bytes
/// (FNV-1a over the lowercased ASCII), each slot the name's index: a lookup hashes
/// the word's bytes once and compares them with at most a few names.
private struct NameTable: Sendable {
    private let names: [[UInt8]]
    /// `-1` for an empty slot; a power-of-two count, at least four per name.
    private let slots: [Int32]

    init(_ names: [String]) {
        self.names = names.map { Array($0.utf8) }
        var count = 16
        while count < names.count * 4 { count *= 2 }
        var slots = [Int32](repeating: -1, count: count)
        for (index, name) in self.names.enumerated() {
            var slot = Self.hash(name) & (count - 1)
            while slots[slot] >= 0 { slot = (slot + 1) & (count - 1) }
            slots[slot] = Int32(index)
        }
        self.slots = slots
    }

    func index(of bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var hash: UInt32 = 2_166_136_261
        for byte in bytes {
            guard byte < 0x80 else { return nil }
            hash = (hash ^ UInt32(Self.lowercased(byte))) &* 16_777_619
        }
        var slot = Int(hash) & (slots.count - 1)
        while true {
            let index = Int(slots[slot])
            guard index >= 0 else { return nil }
            if Self.equal(names[index], bytes) { return index }
            slot = (slot + 1) & (slots.count - 1)
        }
    }

    private static func hash(_ name: [UInt8]) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in name { hash = (hash ^ UInt32(lowercased(byte))) &* 16_777_619 }
        return Int(hash)
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    private static func equal(_ name: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard name.count == bytes.count else { return false }
        for index in 0..<name.count where name[index] != lowercased(bytes[index]) { return false }
        return true
    }
}
