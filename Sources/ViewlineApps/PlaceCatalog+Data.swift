/// The demo catalog's raw material: what kinds of place exist, what people call
/// them, and where in San Francisco they are.
extension PlaceCatalog {
    struct Category {
        /// Shown as the place's `cuisine`.
        var label: String
        /// What people search for to find such a place (dishes, synonyms), space-separated.
        var keywords: String
        /// Name endings for places of this kind ("Golden" + "Slice").
        var nouns: [String]
        /// Typical price level, 1–4.
        var price: Int
        /// How many places of this kind the catalog has.
        var count: Int
    }

    struct Neighbourhood {
        var name: String
        var streets: [String]
        var lat: Double
        var lon: Double
    }

    static let categories: [Category] = [
        Category(
            label: "pizza", keywords: "pizza pizzeria slice pie calzone italian", nouns: ["Pizzeria", "Slice", "Pie Co.", "Crust", "Pizza"], price: 2,
            count: 18),
        Category(
            label: "sushi", keywords: "sushi sashimi nigiri maki omakase japanese fish", nouns: ["Sushi", "Sushi Bar", "Omakase", "Maki House"],
            price: 3, count: 16),
        Category(
            label: "ramen", keywords: "ramen noodle noodles udon soba japanese soup", nouns: ["Ramen", "Noodle House", "Ramen Bar", "Noodle Shop"],
            price: 2, count: 14),
        Category(
            label: "burgers", keywords: "burger burgers hamburger cheeseburger fries shakes american diner",
            nouns: ["Burger", "Burger Joint", "Grill", "Diner"], price: 2, count: 16),
        Category(
            label: "tacos", keywords: "taco tacos taqueria burrito burritos quesadilla mexican salsa",
            nouns: ["Taqueria", "Tacos", "Cantina", "Burrito Bar"], price: 1, count: 16),
        Category(
            label: "café", keywords: "cafe coffee espresso latte cappuccino tea chai breakfast brunch coffeehouse",
            nouns: ["Café", "Coffee", "Roasters", "Espresso Bar", "Coffee House"], price: 1, count: 20),
        Category(
            label: "bakery", keywords: "bakery bread croissant pastry pastries cake cakes bagel donut donuts patisserie",
            nouns: ["Bakery", "Bread Co.", "Patisserie", "Bakehouse"], price: 1, count: 14),
        Category(
            label: "bar", keywords: "bar pub beer cocktail cocktails wine drinks taproom brewery happy hour",
            nouns: ["Tavern", "Taproom", "Lounge", "Pub", "Bar"], price: 2, count: 18),
        Category(
            label: "vegan", keywords: "vegan vegetarian plant based salad salads healthy bowls tofu",
            nouns: ["Greens", "Garden", "Plant Kitchen", "Bowl"], price: 2, count: 12),
        Category(label: "thai", keywords: "thai pad curry noodles tom yum", nouns: ["Thai", "Thai Kitchen", "Siam", "Orchid"], price: 2, count: 14),
        Category(
            label: "italian", keywords: "italian pasta trattoria osteria risotto lasagna gelato",
            nouns: ["Trattoria", "Osteria", "Pasta Bar", "Cucina"], price: 3, count: 14),
        Category(
            label: "chinese", keywords: "chinese dim sum dumplings dumpling noodles wok cantonese szechuan",
            nouns: ["Dumpling House", "Wok", "Dim Sum", "Palace"], price: 2, count: 14),
        Category(
            label: "indian", keywords: "indian curry tandoori biryani masala naan dosa", nouns: ["Tandoor", "Curry House", "Masala", "Spice"],
            price: 2, count: 12),
        Category(
            label: "mexican", keywords: "mexican enchiladas mole tamales margarita tacos", nouns: ["Cocina", "Mercado", "Mexicana"], price: 2,
            count: 10),
        Category(
            label: "korean", keywords: "korean bbq barbecue bibimbap kimchi fried chicken", nouns: ["Korean BBQ", "Bibimbap", "Seoul Kitchen"],
            price: 3, count: 10),
        Category(
            label: "vietnamese", keywords: "vietnamese pho banh mi noodle soup spring rolls", nouns: ["Pho", "Banh Mi", "Saigon"], price: 1, count: 10
        ),
        Category(label: "french", keywords: "french bistro brasserie crepes wine", nouns: ["Bistro", "Brasserie", "Crêperie"], price: 4, count: 10),
        Category(
            label: "mediterranean", keywords: "mediterranean greek falafel hummus gyro gyros kebab lebanese turkish shawarma",
            nouns: ["Mezze", "Falafel", "Kebab House", "Taverna"], price: 2, count: 12),
        Category(
            label: "seafood", keywords: "seafood fish oysters oyster crab lobster chowder", nouns: ["Oyster Bar", "Crab House", "Fish Market"],
            price: 3, count: 10),
        Category(label: "steakhouse", keywords: "steak steakhouse grill chophouse", nouns: ["Steakhouse", "Chophouse", "Grill"], price: 4, count: 8),
        Category(label: "barbecue", keywords: "bbq barbecue ribs brisket smokehouse", nouns: ["Smokehouse", "BBQ", "Pit"], price: 2, count: 8),
        Category(
            label: "sandwiches", keywords: "sandwich sandwiches deli subs lunch", nouns: ["Deli", "Sandwich Shop", "Subs"], price: 1, count: 10),
        Category(
            label: "ice cream", keywords: "ice cream gelato dessert desserts frozen yogurt", nouns: ["Creamery", "Scoops", "Gelateria"], price: 1,
            count: 10),
        Category(label: "ethiopian", keywords: "ethiopian injera", nouns: ["Injera", "Addis Kitchen"], price: 2, count: 6),
        Category(label: "peruvian", keywords: "peruvian ceviche", nouns: ["Cevicheria", "Lima Kitchen"], price: 3, count: 6),
        Category(label: "spanish", keywords: "spanish tapas paella", nouns: ["Tapas Bar", "Bodega"], price: 3, count: 6),
    ]

    static let adjectives = [
        "Golden", "Little", "Blue", "Red", "Happy", "Silver", "Green", "Old", "Royal", "Lucky",
        "Jade", "Sunny", "Spicy", "Rustic", "Urban", "Crimson", "Velvet", "Humble", "Wild", "Copper",
        "Secret", "Midnight", "Coral", "Amber", "Ivory", "Saffron", "Foggy", "Bay", "Hilltop", "Harbor",
        "Corner", "Mission", "Lotus", "Cable Car", "Fog City", "Sunset", "Twin Peaks", "Pacific", "Presidio", "Golden Gate",
    ]

    static let neighbourhoods: [Neighbourhood] = [
        Neighbourhood(name: "Mission", streets: ["Valencia St", "Mission St", "24th St", "16th St"], lat: 37.7599, lon: -122.4148),
        Neighbourhood(name: "SoMa", streets: ["Folsom St", "Howard St", "Harrison St", "Brannan St"], lat: 37.7785, lon: -122.4056),
        Neighbourhood(name: "North Beach", streets: ["Columbus Ave", "Grant Ave", "Stockton St"], lat: 37.8061, lon: -122.4103),
        Neighbourhood(name: "Chinatown", streets: ["Grant Ave", "Clay St", "Jackson St"], lat: 37.7941, lon: -122.4078),
        Neighbourhood(name: "Castro", streets: ["Castro St", "Market St", "18th St"], lat: 37.7609, lon: -122.4350),
        Neighbourhood(name: "Hayes Valley", streets: ["Hayes St", "Gough St", "Octavia Blvd"], lat: 37.7759, lon: -122.4245),
        Neighbourhood(name: "Marina", streets: ["Chestnut St", "Lombard St", "Fillmore St"], lat: 37.8037, lon: -122.4368),
        Neighbourhood(name: "Inner Richmond", streets: ["Clement St", "Geary Blvd", "Balboa St"], lat: 37.7800, lon: -122.4640),
        Neighbourhood(name: "Inner Sunset", streets: ["Irving St", "Judah St", "9th Ave"], lat: 37.7640, lon: -122.4660),
        Neighbourhood(name: "Haight-Ashbury", streets: ["Haight St", "Cole St", "Ashbury St"], lat: 37.7692, lon: -122.4481),
        Neighbourhood(name: "Noe Valley", streets: ["24th St", "Church St", "Castro St"], lat: 37.7502, lon: -122.4337),
        Neighbourhood(name: "Nob Hill", streets: ["Polk St", "Hyde St", "California St"], lat: 37.7930, lon: -122.4161),
        Neighbourhood(name: "Japantown", streets: ["Post St", "Geary Blvd", "Buchanan St"], lat: 37.7854, lon: -122.4294),
        Neighbourhood(name: "Dogpatch", streets: ["3rd St", "22nd St", "Illinois St"], lat: 37.7576, lon: -122.3884),
        Neighbourhood(name: "Pacific Heights", streets: ["Fillmore St", "Divisadero St", "Sacramento St"], lat: 37.7925, lon: -122.4382),
        Neighbourhood(name: "Bernal Heights", streets: ["Cortland Ave", "Mission St", "Folsom St"], lat: 37.7389, lon: -122.4152),
    ]
}
