/// The built-in places catalog: 520 deterministic places and a ranked matcher.
///
/// Generated rather than stored so it ships inside the binary with no resource
/// lookup; every name is unique and every run produces the same catalog.
public struct PlaceCatalog: Sendable {
    public let places: [Place]
    public static let maximumResults = 20

    public static let standard = PlaceCatalog()

    public init() {
        let adjectives = [
            "Golden", "Little", "Blue", "Red", "Happy", "Silver", "Green", "Old", "Royal", "Lucky",
            "Jade", "Sunny", "Spicy", "Rustic", "Urban", "Crimson", "Velvet", "Humble", "Wild", "Copper",
            "Secret", "Midnight", "Coral", "Amber", "Ivory", "Saffron",
        ]
        let nouns = [
            "Lotus", "Spoon", "Dragon", "Garden", "Table", "Lantern", "Harbor", "Kitchen", "Orchid", "Bistro",
            "Pepper", "Olive", "Bamboo", "Tiger", "Basil", "Palace", "Corner", "Oven", "Market", "Noodle",
        ]
        let cuisines = [
            "thai", "italian", "japanese", "mexican", "indian", "chinese", "french", "greek", "korean", "vietnamese",
            "lebanese", "turkish", "spanish", "ethiopian", "american", "brazilian", "peruvian", "moroccan", "german", "burmese",
        ]
        let streets = [
            "Market", "Mission", "Valencia", "Castro", "Church", "Harrison", "Folsom", "Howard", "Bryant", "Brannan",
            "Geary", "Clement", "Irving", "Judah", "Taraval", "Noriega", "Divisadero", "Fillmore", "Polk", "Larkin",
        ]
        var places: [Place] = []
        places.reserveCapacity(adjectives.count * nouns.count)
        for a in adjectives.indices {
            for n in nouns.indices {
                let i = a * nouns.count + n
                let cuisine = cuisines[(i * 7 + a) % cuisines.count]
                let street = streets[(i * 3 + n) % streets.count]
                let number = 100 + (i * 37) % 3900
                places.append(Place(
                    name: "\(adjectives[a]) \(nouns[n])",
                    cuisine: cuisine,
                    address: "\(number) \(street) St, San Francisco",
                    lat: Double(377_000 + (i * 53) % 1000) / 10_000,
                    lon: Double(-1_225_000 + (i * 97) % 1500) / 10_000
                ))
            }
        }
        self.places = places
    }

    /// Ranks places by how many query words occur (case-insensitively) in the name or
    /// cuisine; places matching no word are left out. Ties go alphabetically.
    /// "thai food" finds the Thai places: "food" matches nothing and only lowers no one's rank.
    public func search(_ query: String) -> [Place] {
        let words = query.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard !words.isEmpty else { return [] }
        var scored: [(score: Int, place: Place)] = []
        for place in places {
            let haystack = place.name.lowercased() + " " + place.cuisine
            let score = words.reduce(0) { $0 + (haystack.contains($1) ? 1 : 0) }
            if score > 0 { scored.append((score, place)) }
        }
        scored.sort { $0.score != $1.score ? $0.score > $1.score : $0.place.name < $1.place.name }
        return scored.prefix(Self.maximumResults).map(\.place)
    }
}
