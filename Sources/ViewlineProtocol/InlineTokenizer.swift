/// Splits an inline command line into words, the way `redis-cli` and the redis
/// server share one tokenizer (`sdssplitargs`): the server and the REPL both use this.
///
/// Words are separated by spaces or tabs. Double quotes group words; inside them a
/// backslash escapes `"`, `\`, and stands for `\n`, `\t`, `\r`; any other escaped
/// character is kept as is. A closing quote must be followed by whitespace or the end.
public enum InlineTokenizer {
    /// The words of `line`, quotes and escapes resolved.
    ///
    /// - Throws: `bad_syntax` for an unbalanced quote, a dangling backslash or a
    ///   closing quote followed by more text.
    public static func split(_ line: String) throws(ProtocolError) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var inQuotes = false
        var iterator = line.unicodeScalars.makeIterator()
        var pending: Unicode.Scalar? = nil

        func next() -> Unicode.Scalar? {
            if let p = pending { pending = nil; return p }
            return iterator.next()
        }

        while let c = next() {
            if inQuotes {
                switch c {
                case "\\":
                    guard let escaped = next() else {
                        throw ProtocolError(.badSyntax, "unbalanced quotes: a backslash ends the line inside quotes")
                    }
                    switch escaped {
                    case "n": current.unicodeScalars.append("\n")
                    case "t": current.unicodeScalars.append("\t")
                    case "r": current.unicodeScalars.append("\r")
                    default: current.unicodeScalars.append(escaped)
                    }
                case "\"":
                    inQuotes = false
                    if let after = next() {
                        guard after == " " || after == "\t" else {
                            throw ProtocolError(.badSyntax, "a closing quote must be followed by a space or the end of the line")
                        }
                        pending = after
                    }
                default:
                    current.unicodeScalars.append(c)
                }
            } else {
                switch c {
                case " ", "\t", "\r", "\n":
                    if inWord {
                        words.append(current)
                        current = ""
                        inWord = false
                    }
                case "\"":
                    if inWord && !current.isEmpty {
                        // A quote in the middle of a bare word is kept literally: `it"s` stays `it"s`.
                        current.unicodeScalars.append(c)
                    } else {
                        inWord = true
                        inQuotes = true
                    }
                default:
                    inWord = true
                    current.unicodeScalars.append(c)
                }
            }
        }
        if inQuotes { throw ProtocolError(.badSyntax, "unbalanced quotes") }
        if inWord { words.append(current) }
        return words
    }

    /// Quotes a word so that `split` gives it back unchanged: the inverse used by clients.
    public static func quote(_ word: String) -> String {
        let needsQuotes =
            word.isEmpty
            || word.unicodeScalars.contains { c in
                c == " " || c == "\t" || c == "\"" || c == "\\" || c == "\n" || c == "\r"
            }
        guard needsQuotes else { return word }
        var out = "\""
        for c in word.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }
}
