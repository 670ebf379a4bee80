import ArgumentParser
import Foundation
import GRDB
import NotesCRDT
import NotesStore

/// Indexing and searching the same documents with SQLite's `unicode61` and with the store's
/// tokenizer (`UnsegmentedScriptTokenizer`), side by side in one process: the cost of finding
/// substrings of CJK and other unsegmented scripts, on Latin text that does not need it.
struct SearchIndexBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search-index",
        abstract: "Index and search N documents with unicode61 and with the store's tokenizer; print medians.",
        discussion: """
        Each run makes a fresh in-memory database per tokenizer, indexes the documents (one \
        transaction), then runs every query once; the two tokenizers alternate, run by run. \
        --script latin writes English-like words; cjk writes Japanese text without spaces.
        """
    )

    @Option(help: "Documents to index.") var documents = 10_000
    @Option(help: "Words per document.") var words = 120
    @Option(help: "Runs per tokenizer (medians are printed).") var runs = 5
    @Option(help: "latin or cjk.") var script = "latin"
    @Option(help: "The generator's seed.") var seed: UInt64 = 42

    func run() throws {
        try runReporting {
            guard script == "latin" || script == "cjk" else { throw ValidationError("--script is latin or cjk") }
            let corpus = makeCorpus()
            let queries = script == "latin"
                ? ["\"meeting\"", "\"garden\" \"invoice\"", "\"gro\"*", "\"two words\"", "\"zzzz\""]
                : ["\"東京\"", "\"会議\" \"予定\"", "\"京\"", "\"大阪へ\"", "\"無い言葉\""]
            var results: [String: (index: [Double], search: [Double])] = [:]
            let tokenizers = ["unicode61 remove_diacritics 2", UnsegmentedScriptTokenizer.name]
            for _ in 0 ..< runs {
                for tokenizer in tokenizers {
                    let (index, search) = try measure(tokenizer: tokenizer, corpus: corpus, queries: queries)
                    results[tokenizer, default: ([], [])].index.append(index)
                    results[tokenizer, default: ([], [])].search.append(search)
                }
            }
            let bytes = corpus.reduce(0) { $0 + $1.utf8.count }
            print("\(documents) \(script) documents, \(bytes / 1024) KiB, \(queries.count) queries; medians of \(runs) runs")
            print("tokenizer".padding(toLength: 32, withPad: " ", startingAt: 0) + "   index ms   search ms (all queries)")
            for tokenizer in tokenizers {
                let figures = results[tokenizer]!
                print(tokenizer.padding(toLength: 32, withPad: " ", startingAt: 0)
                      + String(format: "  %9.1f   %9.2f", median(figures.index), median(figures.search)))
            }
        }
    }

    private func makeCorpus() -> [String] {
        var random = SplitMix64(seed: seed)
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        if script == "cjk" {
            let pieces = ["東京", "で", "会議", "。", "予定", "大阪", "へ", "行く", "明日", "の", "資料", "を", "準備", "する", "、", "京都", "新しい", "計画"]
            return (0 ..< documents).map { _ in (0 ..< words).map { _ in pick(pieces) }.joined() }
        }
        // A vocabulary with a few frequent words and many rare ones, as prose has.
        let letters = Array("abcdefghijklmnopqrstuvwxyz")
        let rare = (0 ..< 4000).map { _ in String((0 ..< (3 + Int(random.next() % 8))).map { _ in pick(letters) }) }
        let common = ["the", "a", "of", "and", "to", "in", "is", "meeting", "garden", "invoice", "groceries", "two", "words"]
        return (0 ..< documents).map { _ in
            (0 ..< words).map { _ in random.next() % 3 == 0 ? pick(common) : pick(rare) }.joined(separator: " ")
        }
    }

    /// Milliseconds to index the corpus, and to run every query once (count and best rank).
    private func measure(tokenizer: String, corpus: [String], queries: [String]) throws -> (Double, Double) {
        var configuration = Configuration()
        configuration.prepareDatabase { db in UnsegmentedScriptTokenizer.register(db) }
        let queue = try DatabaseQueue(configuration: configuration)
        return try queue.inDatabase { db in
            try db.execute(sql: "CREATE VIRTUAL TABLE fts USING fts5(body, tokenize = '\(tokenizer)', prefix = '2 3')")
            let start = DispatchTime.now().uptimeNanoseconds
            try db.inTransaction {
                let insert = try db.makeStatement(sql: "INSERT INTO fts (rowid, body) VALUES (?, ?)")
                for (row, text) in corpus.enumerated() { try insert.execute(arguments: [row, text]) }
                return .commit
            }
            let indexed = DispatchTime.now().uptimeNanoseconds
            var found = 0
            for query in queries {
                let rows = try Row.fetchAll(db, sql: """
                    SELECT rowid, bm25(fts) AS rank FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT 20
                    """, arguments: [query])
                found += rows.count
            }
            let searched = DispatchTime.now().uptimeNanoseconds
            if found < 0 { print(found) }
            return (Double(indexed - start) / 1e6, Double(searched - indexed) / 1e6)
        }
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}
