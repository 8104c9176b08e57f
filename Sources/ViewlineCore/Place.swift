import ViewlineProtocol

/// One result of the places backend.
public struct Place: Sendable, Equatable {
    public var name: String
    public var cuisine: String
    public var address: String
    public var lat: Double
    public var lon: Double

    public init(name: String, cuisine: String, address: String, lat: Double, lon: Double) {
        self.name = name
        self.cuisine = cuisine
        self.address = address
        self.lat = lat
        self.lon = lon
    }

    public var json: JSON {
        ["name": .string(name), "cuisine": .string(cuisine), "address": .string(address), "lat": .double(lat), "lon": .double(lon)]
    }
}

/// The places backend behind `search`.
public protocol PlacesService: Sendable {
    func search(_ query: String) async throws -> [Place]
}
