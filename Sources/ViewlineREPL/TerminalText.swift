import ViewlineProtocol

/// Server text made safe for a terminal: every C0 control but newline and tab, DEL and
/// every C1 control becomes U+FFFD, so a place name or an alert from a hostile server
/// (or from another connection of a shared session) cannot set the window title, clear
/// the screen, move the cursor or write the clipboard (OSC 52).
enum TerminalText {
    /// `text` with its control characters replaced.
    static func clean(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var cleaned = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            cleaned.append(isControl(scalar) ? "\u{FFFD}" : scalar)
        }
        return String(cleaned)
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F: true
        default: false
        }
    }
}

extension JSON {
    /// This value with every string in it (object keys included) made safe for a terminal.
    var cleanedForTerminal: JSON {
        switch self {
        case .string(let text): .string(TerminalText.clean(text))
        case .array(let values): .array(values.map(\.cleanedForTerminal))
        case .object(let object):
            .object(JSONObject(object.pairs.map { (TerminalText.clean($0.key), $0.value.cleanedForTerminal) }))
        case .null, .bool, .int, .double, .number: self
        }
    }
}
