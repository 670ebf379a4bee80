// swift-tools-version:6.1
// Regression benchmarks for the CRDT core, with ordo-one/benchmark: they record instruction and
// allocation counts, which repeat on a noisy machine where wall time does not.
//
//     cd Benchmarks && swift package benchmark                      # run and print
//     swift package benchmark baseline update main                  # record a baseline
//     swift package benchmark baseline check main                   # fail on a regression
import PackageDescription

let package = Package(
    name: "crdt-sync-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "crdt-sync", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "CoreBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "NotesCRDT", package: "crdt-sync"),
            ],
            path: "Benchmarks/CoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
