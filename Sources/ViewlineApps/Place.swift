import ViewlineKit

/// One result of the places backend.
public struct Place: Sendable, Equatable, Codable {
    public var name: String
    /// What the place serves or is: a cuisine (`thai`), a dish (`pizza`) or a kind of place (`café`, `bar`).
    public var cuisine: String
    public var address: String
    public var lat: Double
    public var lon: Double
    /// Average rating from 1.0 to 5.0, one decimal.
    public var rating: Double
    /// Price level from 1 (`$`) to 4 (`$$$$`).
    public var price: Int

    public init(name: String, cuisine: String, address: String, lat: Double, lon: Double, rating: Double = 4.0, price: Int = 2) {
        self.name = name
        self.cuisine = cuisine
        self.address = address
        self.lat = lat
        self.lon = lon
        self.rating = rating
        self.price = price
    }
}

/// The places backend behind `search`.
///
/// The server ships ``PlaceCatalog`` (a deterministic demo) behind it; a real places
/// API plugs in by implementing this one method and passing it as the session
/// environment's `places` (see README, "Plugging in a real places backend").
public protocol PlacesService: Sendable {
    /// Places matching `query`, best first, at most 20. Throwing shows the error to the user.
    func search(_ query: String) async throws -> [Place]
}
