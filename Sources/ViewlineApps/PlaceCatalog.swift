/// The built-in demo places backend: a deterministic catalog of San Francisco
/// places and a forgiving matcher.
///
/// The catalog covers what people type first — cuisines (`thai`, `italian`), dishes
/// (`pizza`, `sushi`, `ramen`, `burger`, `tacos`), kinds of place (`coffee`, `bakery`,
/// `bar`), diets (`vegan`) and neighbourhoods (`mission`, `north beach`). It is
/// generated from a fixed seed rather than stored, so it ships inside the binary and
/// every run (and every recorded transcript) sees the same places.
public struct PlaceCatalog: Sendable {
    public let places: [Place]
    public static let maximumResults = 20

    public static let standard = PlaceCatalog()

    /// Words a query may carry that say nothing about which place is meant.
    static let stopWords: Set<String> = [
        "a", "an", "the", "and", "or", "in", "at", "of", "for", "with", "near", "me", "around", "nearby",
        "food", "foods", "restaurant", "restaurants", "place", "places", "spot", "spots", "good", "best", "great",
        "some", "eat", "eats", "open", "now",
    ]

    /// Each place's words, folded: its label (`pizza`), what kind of place it is
    /// (label and keywords), and all of them with where and what it is called
    /// (name, street, neighbourhood).
    let labelWords: [Set<String>]
    let kindWords: [Set<String>]
    let words: [Set<String>]
    /// Every word of the catalog, for typo matching.
    let vocabulary: Set<String>
    /// The places each word of the catalog is a word of, each with the narrowest of
    /// that place's sets holding it: a search looks its words up here instead of
    /// testing every place (a place's label is in its kind, its kind in its words).
    private let postings: [String: [Posting]]
    /// The catalog's words in order: those a prefix begins are a run of it.
    private let sortedVocabulary: [String]

    struct Posting {
        var place: Int32
        var set: WordSet
    }

    /// Which of a place's word sets a word is in first: ranks its match.
    enum WordSet: UInt8 {
        case label, kind, other
    }

    public init() {
        var random = SplitMix64(seed: 0x7669_6577_6C69_6E65)  // "viewline"
        var places: [Place] = []
        var labelWords: [Set<String>] = []
        var kindWords: [Set<String>] = []
        var words: [Set<String>] = []
        var taken: Set<String> = []
        for category in Self.categories {
            for index in 0..<category.count {
                // A fresh name: adjective + one of the category's nouns, never used twice.
                var name: String
                repeat {
                    let adjective = Self.adjectives[Int(random.next() % UInt64(Self.adjectives.count))]
                    let noun = category.nouns[(index + Int(random.next() % 3)) % category.nouns.count]
                    name = "\(adjective) \(noun)"
                } while taken.contains(name)
                taken.insert(name)
                let area = Self.neighbourhoods[Int(random.next() % UInt64(Self.neighbourhoods.count))]
                let street = area.streets[Int(random.next() % UInt64(area.streets.count))]
                let number = 100 + Int(random.next() % 39) * 100 + Int(random.next() % 99)
                let lat = area.lat + Double(Int(random.next() % 81) - 40) / 10_000
                let lon = area.lon + Double(Int(random.next() % 81) - 40) / 10_000
                let rating = Double(36 + Int(random.next() % 14)) / 10
                let price = min(4, max(1, category.price + Int(random.next() % 3) - 1))
                places.append(
                    Place(
                        name: name, cuisine: category.label,
                        address: "\(number) \(street), \(area.name), San Francisco",
                        lat: (lat * 10_000).rounded() / 10_000, lon: (lon * 10_000).rounded() / 10_000,
                        rating: rating, price: price))
                let label = Set(Self.words(in: category.label))
                let kind = label.union(Self.words(in: category.keywords))
                labelWords.append(label)
                kindWords.append(kind)
                words.append(kind.union(Self.words(in: [name, street, area.name].joined(separator: " "))))
            }
        }
        self.places = places
        self.labelWords = labelWords
        self.kindWords = kindWords
        self.words = words
        let vocabulary = words.reduce(into: Set<String>()) { $0.formUnion($1) }
        self.vocabulary = vocabulary
        var postings: [String: [Posting]] = [:]
        for index in words.indices {
            for word in words[index] {
                let set: WordSet = labelWords[index].contains(word) ? .label : kindWords[index].contains(word) ? .kind : .other
                postings[word, default: []].append(Posting(place: Int32(index), set: set))
            }
        }
        self.postings = postings
        sortedVocabulary = vocabulary.sorted()
    }

    /// Ranks places by how well each query word matches their words: exactly, by its
    /// singular (`pizzas`), or as a prefix (`pizz`); a word that matches nothing in the
    /// whole catalog is then tried with one typo allowed, two for words of 8 letters
    /// or more (`sushii`, `expresso`). A word naming the kind of place counts more than
    /// the same word in a name or an address ("bar" finds bars before a "Ramen Bar").
    /// Places matching no word are left out; ties go to the better rated, then
    /// alphabetically. A query of only filler words (`food`) lists
    /// the best-rated places.
    public func search(_ query: String) -> [Place] {
        let query = query.utf8.count > Self.maximumQueryBytes ? String(decoding: query.utf8.prefix(Self.maximumQueryBytes), as: UTF8.self) : query
        let all = Self.words(in: query)
        guard !all.isEmpty else { return [] }
        let meaningful = all.filter { !Self.stopWords.contains($0) }
        var scores = [Int](repeating: 0, count: places.count)
        if meaningful.isEmpty {
            scores = places.map { _ in 1 }
        } else {
            var grades = [Grades](repeating: Grades(), count: places.count)
            var touched: [Int] = []
            for word in meaningful.prefix(Self.maximumQueryWords) {
                // A newer search replaced this one: its ranking is of no use.
                if Task.isCancelled { return [] }
                for (match, grade) in matches(of: word) {
                    for posting in postings[match] ?? [] {
                        let index = Int(posting.place)
                        if grades[index] == Grades() { touched.append(index) }
                        grades[index].raise(posting.set, to: grade)
                    }
                }
                var matchedExactly = false
                for index in touched {
                    let quality = grades[index].quality
                    if quality > 0 { matchedExactly = true }
                    scores[index] += quality
                    grades[index] = Grades()
                }
                touched.removeAll(keepingCapacity: true)
                guard !matchedExactly, word.count >= 4 else { continue }
                let typos = word.count >= 8 ? 2 : 1
                var near: Set<Int> = []
                for candidate in vocabulary where Self.distance(word, candidate, limit: typos) <= typos {
                    for posting in postings[candidate] ?? [] { near.insert(Int(posting.place)) }
                }
                for index in near { scores[index] += 1 }
            }
        }
        let ranked = places.indices.filter { scores[$0] > 0 }.sorted { a, b in
            if scores[a] != scores[b] { return scores[a] > scores[b] }
            if places[a].rating != places[b].rating { return places[a].rating > places[b].rating }
            return places[a].name < places[b].name
        }
        return ranked.prefix(Self.maximumResults).map { places[$0] }
    }

    /// What a query is cut to before ranking, so its cost is bounded whoever calls:
    /// its first 256 bytes and, of those, the first 16 meaningful words.
    public static let maximumQueryBytes = 256
    public static let maximumQueryWords = 16

    // MARK: - Matching

    /// The catalog's words `word` matches, each with how well: 4 itself, 3 its
    /// singular, 2 a word it (or its singular, of 3 letters or more) begins, when it
    /// has 3 letters or more.
    func matches(of word: String) -> [String: Int] {
        let stem = Self.singular(word)
        var found: [String: Int] = [:]
        if word.count >= 3 {
            for prefix in stem.count >= 3 && stem != word ? [word, stem] : [word] {
                var index = Self.firstIndex(notBelow: prefix, in: sortedVocabulary)
                while index < sortedVocabulary.count, sortedVocabulary[index].hasPrefix(prefix) {
                    found[sortedVocabulary[index]] = 2
                    index += 1
                }
            }
        }
        if postings[stem] != nil { found[stem] = 3 }
        if postings[word] != nil { found[word] = 4 }
        return found
    }

    /// The index of the first of `sorted` not below `word`.
    private static func firstIndex(notBelow word: String, in sorted: [String]) -> Int {
        var (low, high) = (0, sorted.count)
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < word { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// How well one query word matched one place, in each of its word sets (the best
    /// of ``matches(of:)``'s grades among the set's words).
    struct Grades: Equatable {
        var label: UInt8 = 0
        var kind: UInt8 = 0
        var other: UInt8 = 0

        /// A word graded `grade` is in `set`, and so in every wider set.
        mutating func raise(_ set: WordSet, to grade: Int) {
            let grade = UInt8(grade)
            if set == .label { label = max(label, grade) }
            if set != .other { kind = max(kind, grade) }
            other = max(other, grade)
        }

        /// The word's worth to the place: its label counts more than its kind, its
        /// kind more than its name and address.
        var quality: Int {
            label > 0 ? Int(label) + 2 : kind > 0 ? Int(kind) + 1 : Int(other)
        }
    }

    /// Lowercased words without accents or punctuation: "Café" → "cafe", "Joe's" → "joes".
    static func words(in text: String) -> [String] {
        var result: [String] = []
        var current = ""
        for scalar in text.lowercased().unicodeScalars {
            if let folded = folding[scalar] {
                current.unicodeScalars.append(folded)
            } else if scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) {
                current.unicodeScalars.append(scalar)
            } else if scalar == "'" || scalar == "’" {
                continue
            } else if !current.isEmpty {
                result.append(current)
                current = ""
            }
        }
        if !current.isEmpty { result.append(current) }
        return result
    }

    private static let folding: [Unicode.Scalar: Unicode.Scalar] = [
        "à": "a", "á": "a", "â": "a", "ä": "a", "ã": "a", "ç": "c", "è": "e", "é": "e", "ê": "e", "ë": "e",
        "í": "i", "î": "i", "ï": "i", "ñ": "n", "ó": "o", "ô": "o", "ö": "o", "ú": "u", "û": "u", "ü": "u",
    ]

    /// A plural's singular, roughly: "tacos" → "taco", "bakeries" → "bakery", "sandwiches" → "sandwich".
    static func singular(_ word: String) -> String {
        guard word.count > 3, word.hasSuffix("s"), !word.hasSuffix("ss") else { return word }
        if word.hasSuffix("ies") { return String(word.dropLast(3)) + "y" }
        if word.hasSuffix("ches") || word.hasSuffix("shes") || word.hasSuffix("xes") { return String(word.dropLast(2)) }
        return String(word.dropLast())
    }

    /// Damerau–Levenshtein distance (adjacent swaps count once), giving up above `limit`.
    static func distance(_ a: String, _ b: String, limit: Int) -> Int {
        let a = Array(a), b = Array(b)
        if abs(a.count - b.count) > limit { return limit + 1 }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            current[0] = i
            var best = current[0]
            for j in 1...max(b.count, 1) where !b.isEmpty {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], previous2[j - 2] + 1)
                }
                best = min(best, current[j])
            }
            if best > limit { return limit + 1 }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}

/// A small deterministic generator (SplitMix64), so the catalog is the same everywhere.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
