/// ANSI styling, off when `NO_COLOR` is set or output is not a terminal.
public struct TerminalStyle: Sendable {
    public var colors: Bool

    public init(colors: Bool) { self.colors = colors }

    func apply(_ code: String, _ text: String) -> String { colors ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
    public func bold(_ text: String) -> String { apply("1", text) }
    public func dim(_ text: String) -> String { apply("2", text) }
    public func red(_ text: String) -> String { apply("31", text) }
    public func green(_ text: String) -> String { apply("32", text) }
    public func yellow(_ text: String) -> String { apply("33", text) }
    public func cyan(_ text: String) -> String { apply("36", text) }
}
