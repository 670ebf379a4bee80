import Foundation

/// One self-contained HTML page for a run: a timeline per device (edits, syncs, partitions,
/// crashes, reinstalls, clock jumps), the moment healing began and the moment the devices
/// converged, the counters, and what went wrong. No scripts, no external files.
public enum HTMLReport {
    /// The page for one run of `scenario`, from its result and trace; with `summary`, a line on all
    /// the runs it came from.
    public static func render(scenario: Scenario, result: RunResult, trace: Trace, summary: Simulator.Summary? = nil) -> String {
        let width = 1100.0
        let left = 90.0
        let rowHeight = 46.0
        let top = 30.0
        let total = Double(max(result.simulatedMilliseconds, 1))
        func x(_ t: UInt64) -> Double { left + (width - left - 10) * Double(t) / total }
        let height = top + rowHeight * Double(scenario.devices) + 30
        var svg = ""
        func y(_ device: Int) -> Double { top + rowHeight * Double(device) }

        // Rows and the time axis.
        for d in 0 ..< scenario.devices {
            svg += "<rect x='\(left)' y='\(y(d) + 4)' width='\(width - left - 10)' height='\(rowHeight - 8)' class='row'/>"
            svg += "<text x='6' y='\(y(d) + rowHeight / 2 + 4)' class='label'>device \(d)</text>"
        }
        for i in 0 ... 10 {
            let t = UInt64(total * Double(i) / 10)
            svg += "<line x1='\(x(t))' y1='\(top - 4)' x2='\(x(t))' y2='\(height - 24)' class='grid'/>"
            svg += "<text x='\(x(t) - 12)' y='\(height - 8)' class='axis'>\(formatDuration(t))</text>"
        }

        // Partitions as bands, from each cut to its heal (or to the final healing).
        var open: [String: UInt64] = [:]
        var healAt: UInt64 = result.simulatedMilliseconds
        for entry in trace.entries where entry.kind == .healAll { healAt = entry.time }
        func band(_ key: String, _ end: UInt64) {
            guard let start = open.removeValue(forKey: key) else { return }
            let parts = key.split(separator: "/")
            let d = Int(parts[0])!
            let direction = ["both", "outbound", "inbound"][Int(parts[2]) ?? 0]
            let w = max(1.5, x(end) - x(start))
            svg += "<rect x='\(x(start))' y='\(y(d) + 6)' width='\(w)' height='\(rowHeight - 12)' class='cut \(direction)'>"
            svg += "<title>partition (\(direction)) from hub \(hubName(scenario, Int(parts[1]) ?? -1)), \(formatDuration(start)) to \(formatDuration(end))</title></rect>"
        }
        for entry in trace.entries where entry.kind == .partition || entry.kind == .heal {
            let key = "\(entry.device)/\(entry.a)/\(entry.b)"
            if entry.kind == .partition {
                if open[key] == nil { open[key] = entry.time }
            } else {
                band(key, entry.time)
            }
        }
        for key in Array(open.keys) { band(key, healAt) }

        // Point events.
        for entry in trace.entries where entry.device >= 0 {
            let cx = x(entry.time)
            let cy = y(entry.device)
            let when = formatDuration(entry.time)
            switch entry.kind {
            case .edit:
                let kind = EditKind.allCases.indices.contains(Int(entry.a)) ? EditKind.allCases[Int(entry.a)].rawValue : "edit"
                svg += "<line x1='\(cx)' y1='\(cy + 10)' x2='\(cx)' y2='\(cy + 20)' class='edit'><title>\(when) \(kind) (seq \(entry.b))</title></line>"
            case .sync:
                svg += "<circle cx='\(cx)' cy='\(cy + 30)' r='2.6' class='sync'><title>\(when) sync via \(hubName(scenario, Int(entry.a))): sent \(entry.b) changes, applied \(entry.c), pending \(entry.d)</title></circle>"
            case .syncFailed:
                svg += "<circle cx='\(cx)' cy='\(cy + 30)' r='2.6' class='syncfail'><title>\(when) sync via \(hubName(scenario, Int(entry.a))) failed</title></circle>"
            case .crash:
                svg += "<text x='\(cx - 4)' y='\(cy + 26)' class='crash'>✕<title>\(when) crash and restart</title></text>"
            case .reinstall:
                svg += "<text x='\(cx - 5)' y='\(cy + 26)' class='reinstall'>⟲<title>\(when) reinstalled from nothing (a new replica id)</title></text>"
            case .copy:
                svg += "<text x='\(cx - 5)' y='\(cy + 26)' class='reinstall'>⧉<title>\(when) its database replaced by a copy of device \(entry.a)'s (it takes a new replica id)</title></text>"
            case .fork where entry.a >= 0:
                svg += "<text x='\(cx - 5)' y='\(cy + 26)' class='reinstall'>⑂<title>\(when) its database replaced by a copy of device \(entry.a)'s that keeps its identity (both write as one replica until one re-issues its own)</title></text>"
            case .restore:
                svg += "<text x='\(cx - 5)' y='\(cy + 26)' class='reinstall'>⎌<title>\(when) a backup copied back over its database (its identity's seqs had reached \(entry.b), the backup holds \(entry.a))</title></text>"
            case .clockJump:
                svg += "<text x='\(cx - 4)' y='\(cy + 16)' class='jump'>⏱<title>\(when) clock jumps by \(formatSigned(entry.a))</title></text>"
            case .death:
                svg += "<text x='\(cx - 4)' y='\(cy + 26)' class='crash'>☠<title>\(when) stops for good; its folder files rot</title></text>"
            default:
                break
            }
        }
        for entry in trace.entries where entry.kind == .violation {
            svg += "<line x1='\(x(entry.time))' y1='\(top)' x2='\(x(entry.time))' y2='\(height - 26)' class='violation'><title>a safety check failed at \(formatDuration(entry.time))</title></line>"
        }
        svg += "<line x1='\(x(healAt))' y1='\(top - 6)' x2='\(x(healAt))' y2='\(height - 26)' class='heal'><title>every partition healed, faults off</title></line>"
        svg += "<text x='\(x(healAt) + 3)' y='\(top - 10)' class='axis'>heal</text>"
        if let converged = result.convergedAtMilliseconds {
            svg += "<line x1='\(x(converged))' y1='\(top - 6)' x2='\(x(converged))' y2='\(height - 26)' class='converged'><title>converged at \(formatDuration(converged))</title></line>"
            svg += "<text x='\(x(converged) + 3)' y='\(top - 18)' class='convergedlabel'>converged \(formatDuration(converged))</text>"
        }

        var rows: [(String, String)] = [
            ("scenario", scenario.name), ("seed", "\(result.seed)"), ("verdict", result.failed ? "FAILED" : "passed"),
            ("converged", result.converged ? "yes, at \(result.convergedAtMilliseconds.map(formatDuration) ?? "?")" : "no (\(result.divergentDevices) devices differ)"),
            ("lost edits", "\(result.lostEdits)"), ("stuck pending", "\(result.stuckPending)"),
            ("events", "\(result.events)"), ("simulated time", formatDuration(result.simulatedMilliseconds)),
            ("trace hash", result.traceHash),
        ]
        let s = result.stats
        rows += [
            ("edits", "\(s.edits) (\(s.skippedEdits) skipped: no suitable note)"),
            ("syncs", "\(s.syncs) (\(s.failedSyncs) failed, \(s.retries) retries)"),
            ("network", "\(s.lost) lost, \(s.duplicated) duplicated, \(s.reordered) reordered, \(s.delayed) delayed"),
            ("damaged bundles", "\(s.corruptInjected) injected, \(s.corruptRejected) rejected"),
            ("faults", "\(s.partitions) partitions, \(s.crashes) crashes, \(s.reinstalls) reinstalls, \(s.clockJumps) clock jumps"),
            ("forgotten", "\(s.forgottenOperations) operations that never left a reinstalled device"),
            ("healing", "\(s.healRounds) sync rounds"),
        ]
        if let summary {
            rows.append(("all runs", "\(summary.runs) runs from seed \(summary.seed): \(summary.failed) failed, \(summary.divergent) divergent"))
        }
        let table = rows.map { "<tr><th>\(escape($0.0))</th><td>\(escape($0.1))</td></tr>" }.joined()
        let problems = result.problems.isEmpty ? "<p>None.</p>" : "<ul>" + result.problems.map { "<li>\(escape($0))</li>" }.joined() + "</ul>"
        let digests = trace.digests.enumerated().map { "<li>device \($0.offset): <code>\(escape(String($0.element.prefix(16))))</code></li>" }.joined()

        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8">
        <title>crdt-sync simulation: \(escape(scenario.name)) seed \(result.seed)</title>
        <style>
        body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
        h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 24px; }
        table { border-collapse: collapse; } th { text-align: left; padding: 2px 12px 2px 0; color: #555; font-weight: 600; }
        .row { fill: #f6f7f9; } .label { font-size: 12px; fill: #333; } .axis { font-size: 10px; fill: #777; }
        .grid { stroke: #e4e6ea; } .edit { stroke: #2f6fdf; stroke-width: 1; }
        .sync { fill: #1f9d55; } .syncfail { fill: none; stroke: #d33; stroke-width: 1; }
        .cut { fill: #f0a030; opacity: .28; } .cut.outbound { fill: #e07020; } .cut.inbound { fill: #c0a000; }
        .crash { fill: #d00; font-size: 14px; } .reinstall { fill: #8a2be2; font-size: 15px; } .jump { fill: #555; font-size: 11px; }
        .violation { stroke: #d00; stroke-width: 2; } .heal { stroke: #777; stroke-dasharray: 4 3; }
        .converged { stroke: #1f9d55; stroke-width: 2; } .convergedlabel { font-size: 11px; fill: #1f9d55; }
        .legend span { margin-right: 16px; } .failed { color: #d00; } code { font-size: 12px; }
        </style></head><body>
        <h1>\(escape(scenario.name)), seed \(result.seed): <span class="\(result.failed ? "failed" : "")">\(result.failed ? "FAILED" : "passed")</span></h1>
        <p>\(escape(scenario.description))</p>
        <div class="legend">
        <span style="color:#2f6fdf">| edit</span><span style="color:#1f9d55">● sync</span><span style="color:#d33">○ failed sync</span>
        <span style="color:#e07020">▮ partition</span><span style="color:#d00">✕ crash</span><span style="color:#8a2be2">⟲ reinstall</span>
        <span>⏱ clock jump</span><span>┆ heal</span><span style="color:#1f9d55">│ converged</span>
        </div>
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))">\(svg)</svg>
        <h2>Summary</h2><table>\(table)</table>
        <h2>Problems</h2>\(problems)
        <h2>Final digests</h2><ul>\(digests)</ul>
        <p>Replay: <code>\(escape(Simulator.replayCommand(scenarioPath: "SCENARIO", seed: result.seed, events: nil)))</code></p>
        </body></html>
        """
    }

    static func hubName(_ scenario: Scenario, _ index: Int) -> String {
        scenario.hubs.indices.contains(index) ? scenario.hubs[index].name : "every hub"
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "'", with: "&#39;")
    }

    /// "3d 4h", "2h 05m", "4m 10s", "850ms".
    public static func formatDuration(_ milliseconds: UInt64) -> String {
        let s = milliseconds / 1000
        if s >= 86400 { return "\(s / 86400)d \(s % 86400 / 3600)h" }
        if s >= 3600 { return "\(s / 3600)h \(String(format: "%02d", s % 3600 / 60))m" }
        if s >= 60 { return "\(s / 60)m \(s % 60)s" }
        if s >= 1 { return "\(s)s" }
        return "\(milliseconds)ms"
    }

    static func formatSigned(_ milliseconds: Int64) -> String {
        (milliseconds < 0 ? "-" : "+") + formatDuration(milliseconds.magnitude)
    }
}
