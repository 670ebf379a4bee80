// swift-tools-version:6.1
import PackageDescription

/// One set of Swift settings for every target: Swift 6 language mode with strict concurrency.
/// (No unsafe flags: SwiftPM refuses a dependency that has them, and apps embed these libraries.
/// Full cross-module optimization, `-cross-module-optimization`, made a simulation run about 1.5%
/// cheaper; not worth that.)
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "crdt-sync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "NotesCRDT", targets: ["NotesCRDT"]),
        .library(name: "NotesStore", targets: ["NotesStore"]),
        .library(name: "NotesSync", targets: ["NotesSync"]),
        .library(name: "NotesSyncHTTP", targets: ["NotesSyncHTTP"]),
        .library(name: "NotesRelayServer", targets: ["NotesRelay", "NotesRelayServer"]),
        .library(name: "NotesRelayPostgres", targets: ["NotesRelayPostgres"]),
        .library(name: "NotesSimulator", targets: ["NotesSimulator"]),
        .executable(name: "crdt-sync", targets: ["crdt-sync"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3" ..< "5.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // Documentation: `swift package generate-documentation --target NotesSync` (CI builds every catalog).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .target(name: "NotesCRDT", swiftSettings: swiftSettings),
        .target(
            name: "NotesSync",
            dependencies: [
                "NotesCRDT", "Deflate", .product(name: "Crypto", package: "swift-crypto"),
                // scrypt (KDF.Scrypt), for space keys made from a passphrase.
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The relay client over AsyncHTTPClient: no server, no database.
        .target(
            name: "NotesSyncHTTP",
            dependencies: [
                "NotesCRDT", "NotesSync",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // The relay's protocol logic and storage, with no HTTP server: the server and the simulator run it.
        .target(
            name: "NotesRelay",
            dependencies: [
                "NotesCRDT", "NotesSync",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The relay's PostgreSQL storage, apart so that NotesRelay's users (the simulator, apps) need no postgres-nio.
        .target(
            name: "NotesRelayPostgres",
            dependencies: [
                "NotesRelay", "NotesCRDT", "NotesSync",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NotesRelayServer",
            dependencies: [
                "NotesRelay", "NotesSync",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        .target(name: "Deflate", dependencies: ["CZlib"], swiftSettings: swiftSettings),
        .target(
            name: "EditingTraces",
            dependencies: ["NotesCRDT", "NotesSync", "CZlib"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NotesStore",
            dependencies: [
                "NotesCRDT", "NotesSync", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NotesSimulator",
            dependencies: ["NotesSync", "NotesStore", "NotesRelay", "NotesCRDT", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // What tests and benchmarks share (seeded synthetic workloads); not a product.
        .target(name: "NotesTestSupport", dependencies: ["NotesCRDT"], swiftSettings: swiftSettings),
        // The team's benchmarks and stress tools; not a product (`swift run crdt-sync-bench`).
        .executableTarget(
            name: "crdt-sync-bench",
            dependencies: [
                "NotesCRDT", "NotesStore", "NotesSync", "NotesSyncHTTP", "NotesRelay", "NotesRelayServer", "NotesRelayPostgres", "NotesTestSupport",
                "Deflate",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // Structure-aware fuzzing of bundles: hostile values in valid framing (tests and crdt-sync-fuzz).
        .target(
            name: "BundleFuzz",
            dependencies: ["NotesCRDT", "NotesStore", "NotesSync", "NotesRelay", "Deflate", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "crdt-sync-fuzz",
            dependencies: ["BundleFuzz", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "crdt-sync",
            dependencies: [
                "NotesCRDT", "NotesStore", "NotesSync", "EditingTraces", "NotesSyncHTTP", "NotesRelay", "NotesRelayServer",
                "NotesRelayPostgres", "NotesSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesCRDTTests",
            dependencies: ["NotesCRDT", "BundleFuzz", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesSimulatorTests",
            dependencies: ["NotesSimulator", "NotesSync", "NotesStore", "NotesCRDT"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesSyncTests",
            dependencies: ["NotesSync", "NotesStore", "NotesCRDT", "NotesTestSupport", "Deflate", "BundleFuzz"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesSyncHTTPTests",
            dependencies: [
                "NotesSyncHTTP", "NotesRelay", "NotesRelayServer", "NotesRelayPostgres", "NotesSync", "NotesStore", "NotesCRDT",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesRelayTests",
            dependencies: ["NotesRelay", "NotesRelayPostgres", "NotesSync", "NotesStore", "NotesCRDT", "NotesTestSupport", "BundleFuzz",
                           .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EditingTracesTests",
            dependencies: ["EditingTraces", "NotesCRDT"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesStoreTests",
            dependencies: ["NotesStore", "NotesCRDT", "NotesSync", "NotesTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["NotesCRDT", "NotesStore", "NotesTestSupport", "BundleFuzz"],
            swiftSettings: swiftSettings
        ),
    ]
)
