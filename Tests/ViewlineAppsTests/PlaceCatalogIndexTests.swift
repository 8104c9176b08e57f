import Testing

@testable import ViewlineApps

/// The catalog's search looks words up in an index; it ranks exactly as testing every
/// place against every query word does (the way it was written first, kept here as
/// the reference), for every word of the catalog, their prefixes, plurals, typos,
/// several words, filler and words from no catalog.
@Suite struct PlaceCatalogIndexTests {
    let catalog = PlaceCatalog.standard

    static let queries: [String] = {
        let vocabulary = PlaceCatalog.standard.vocabulary.sorted()
        var queries = vocabulary
        for word in vocabulary {
            queries.append(String(word.prefix(2)))
            queries.append(String(word.prefix(3)))
            queries.append(String(word.prefix(4)))
            queries.append(word + "s")
            queries.append(word + "es")
            queries.append(String(word.dropLast()) + "ies")
            queries.append(String(word.dropFirst()))
            queries.append(String(word.reversed()))
        }
        queries += [
            "", "food", "the best food near me", "thai mission", "coffee north beach", "pizza sushi tacos", "sushii",
            "expresso", "piza", "tacoz", "SUSHI", "café", "crêperie", "日本", "x", "zzzz", "bakeries", "sandwiches",
            "ice cream", "dim sum", String(repeating: "pizza ", count: 40),
        ]
        return Array(Set(queries)).sorted()
    }()

    @Test func theIndexRanksAsTestingEveryPlaceDoes() {
        var differing: [String] = []
        for query in Self.queries where catalog.search(query) != reference(query) { differing.append(query) }
        #expect(differing.isEmpty, "\(differing.count) of \(Self.queries.count) queries rank differently: \(differing.prefix(10))")
        #expect(Self.queries.count > 1000)
    }

    /// The search as first written: every place's word sets tested for every word.
    func reference(_ query: String) -> [Place] {
        let query =
            query.utf8.count > PlaceCatalog.maximumQueryBytes
            ? String(decoding: query.utf8.prefix(PlaceCatalog.maximumQueryBytes), as: UTF8.self) : query
        let all = PlaceCatalog.words(in: query)
        guard !all.isEmpty else { return [] }
        let meaningful = all.filter { !PlaceCatalog.stopWords.contains($0) }
        let places = catalog.places
        var scores = [Int](repeating: 0, count: places.count)
        if meaningful.isEmpty {
            scores = places.map { _ in 1 }
        } else {
            for word in meaningful.prefix(PlaceCatalog.maximumQueryWords) {
                let stem = PlaceCatalog.singular(word)
                var matchedExactly = false
                for index in places.indices {
                    var quality = Self.quality(of: word, stem: stem, in: catalog.labelWords[index])
                    if quality > 0 {
                        quality += 2
                    } else {
                        quality = Self.quality(of: word, stem: stem, in: catalog.kindWords[index])
                        quality = quality > 0 ? quality + 1 : Self.quality(of: word, stem: stem, in: catalog.words[index])
                    }
                    if quality > 0 { matchedExactly = true }
                    scores[index] += quality
                }
                guard !matchedExactly, word.count >= 4 else { continue }
                let typos = word.count >= 8 ? 2 : 1
                let near = catalog.vocabulary.filter { PlaceCatalog.distance(word, $0, limit: typos) <= typos }
                guard !near.isEmpty else { continue }
                for index in places.indices where !catalog.words[index].isDisjoint(with: near) { scores[index] += 1 }
            }
        }
        let ranked = places.indices.filter { scores[$0] > 0 }.sorted { a, b in
            if scores[a] != scores[b] { return scores[a] > scores[b] }
            if places[a].rating != places[b].rating { return places[a].rating > places[b].rating }
            return places[a].name < places[b].name
        }
        return ranked.prefix(PlaceCatalog.maximumResults).map { places[$0] }
    }

    static func quality(of word: String, stem: String, in words: Set<String>) -> Int {
        if words.contains(word) { return 4 }
        if words.contains(stem) { return 3 }
        guard word.count >= 3 else { return 0 }
        return words.contains { $0.hasPrefix(word) || (stem.count >= 3 && $0.hasPrefix(stem)) } ? 2 : 0
    }
}
