import Testing
import ViewlineApps
import ViewlineKit

/// The demo catalog answers what a newcomer types first.
@Suite struct PlaceCatalogTests {
    let catalog = PlaceCatalog.standard

    /// Common first searches, each with the kind of place every top result must be.
    static let commonQueries: [(query: String, kind: String)] = [
        ("pizza", "pizza"), ("sushi", "sushi"), ("ramen", "ramen"), ("burger", "burgers"), ("tacos", "tacos"),
        ("coffee", "café"), ("cafe", "café"), ("café", "café"), ("vegan", "vegan"), ("bakery", "bakery"),
        ("bar", "bar"), ("thai food", "thai"), ("italian", "italian"), ("chinese", "chinese"), ("indian", "indian"),
        ("korean", "korean"), ("pho", "vietnamese"), ("dim sum", "chinese"), ("seafood", "seafood"),
        ("steak", "steakhouse"), ("ice cream", "ice cream"), ("sandwich", "sandwiches"), ("tapas", "spanish"),
    ]

    @Test(arguments: commonQueries.map(\.query))
    func aCommonSearchFindsPlacesOfThatKindFirst(_ query: String) {
        let kind = Self.commonQueries.first { $0.query == query }!.kind
        let results = catalog.search(query)
        #expect(results.count >= 5, "\(query): only \(results.count) results")
        #expect(results.prefix(5).allSatisfy { $0.cuisine == kind }, "\(query): \(results.prefix(5).map(\.cuisine))")
    }

    @Test(arguments: [
        ("pizzas", "pizza"), ("sushii", "sushi"), ("burgers", "burgers"), ("bakeries", "bakery"),
        ("expresso", "café"), ("piza", "pizza"), ("tacoz", "tacos"), ("SUSHI", "sushi"),
    ])
    func pluralsTyposAndCaseStillFindSomething(_ query: String, _ kind: String) {
        let results = catalog.search(query)
        #expect(!results.isEmpty, "\(query) found nothing")
        #expect(results.first?.cuisine == kind)
    }

    @Test func aNeighbourhoodFindsThePlacesInIt() {
        let results = catalog.search("north beach")
        #expect(results.count >= 5)
        #expect(results.prefix(5).allSatisfy { $0.address.contains("North Beach") })
    }

    @Test func thaiFoodFindsOnlyThaiPlacesBecauseFoodIsFiller() {
        let results = catalog.search("thai food")
        #expect(!results.isEmpty && results.allSatisfy { $0.cuisine == "thai" })
    }

    @Test func fillerAloneListsTheBestRated() {
        let results = catalog.search("food")
        #expect(results.count == PlaceCatalog.maximumResults)
        #expect(results.map(\.rating) == results.map(\.rating).sorted(by: >))
    }

    @Test func nonsenseAndBlankFindNothing() {
        #expect(catalog.search("xyzzy").isEmpty)
        #expect(catalog.search("   ").isEmpty)
    }

    @Test func resultsAreCappedAndRankedByMatchThenRating() {
        let results = catalog.search("coffee")
        #expect(results.count == PlaceCatalog.maximumResults)
        #expect(results.map(\.rating) == results.map(\.rating).sorted(by: >))
    }

    @Test func theCatalogIsBelievableAndTheSameEveryTime() {
        #expect(catalog.places == PlaceCatalog().places)
        #expect(catalog.places.count >= 300)
        #expect(Set(catalog.places.map(\.name)).count == catalog.places.count, "names are unique")
        for place in catalog.places {
            #expect((1.0...5.0).contains(place.rating) && (1...4).contains(place.price))
            #expect(place.address.hasSuffix(", San Francisco"))
            #expect((37.70...37.82).contains(place.lat) && (-122.48 ... -122.38).contains(place.lon))
        }
    }
}
