// swift-tools-version:6.1
import PackageDescription
let s: [SwiftSetting] = [.swiftLanguageMode(.v6), .enableUpcomingFeature("ExistentialAny")]
let package = Package(
    name: "phase",
    targets: [
        .target(name: "NotesCRDT", swiftSettings: s),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        .target(name: "Deflate", dependencies: ["CZlib"], swiftSettings: s),
        .executableTarget(name: "Phase", dependencies: ["NotesCRDT", "Deflate", "CZlib"], swiftSettings: s),
    ]
)
