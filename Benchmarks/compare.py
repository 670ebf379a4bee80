#!/usr/bin/env python3
"""Side-by-side comparison of crdt-sync with Yrs (pycrdt) and Loro on the editing traces.

Installs pycrdt and loro from PyPI into Benchmarks/.venv (once), replays the same traces in them and
in crdt-sync (the release build of `crdt-sync trace replay --json`) in the same run, several times,
and prints one table of medians with the ratio ours/theirs.

    python3 Benchmarks/compare.py [--runs 5] [--repeat 20] [--traces automerge-paper,rustcode] [--markdown]

Every system is measured the same way: each run is one process, which replays the trace once, gives
freed memory back (malloc_trim), then merges the whole history into a fresh document once cold and
--repeat more times warm (a fresh document each time); the merge figure is the median of the warm
merges, the cold one is reported apart. The table gives the medians over --runs processes.

Figures per system and trace:
  local   ms to apply every patch as local edits, the first replay of the process (Yrs: one
          transaction; Loro: one commit)
  merge   ms to apply the whole encoded history to a fresh document until the text is readable
          (median of the warm merges in one process)
  cold    ms of the first merge of the process
  faults  minor page faults of that cold merge (the fresh pages it wrote: most of what it costs
          over a warm merge here)
  bytes   size of the whole encoded history (Yrs: v1 update; Loro: updates export; ours: one bundle body)
  load    ms to open a saved snapshot until the text is readable (Loro: snapshot import; ours: Notebook(snapshot:))
  memMB   growth of the process's resident memory across the replay, the document alive
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import venv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRACES = os.path.join(ROOT, "Tests", "Fixtures", "traces")
VENV = os.path.join(HERE, ".venv")

PEER_SCRIPT = r'''
import gzip, json, resource, statistics, sys, time
system, path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
with gzip.open(path) as f:
    trace = json.load(f)
if trace.get("kind") == "concurrent":
    print(json.dumps({"skip": "concurrent traces are replayed by crdt-sync only"})); sys.exit(0)
patches = [p for t in trace["txns"] for p in t["patches"]]
start_content = trace.get("startContent", "")
def rss_mb():
    # Resident memory now (not the peak: parsing the trace set a peak that the replay may stay
    # under), as crdt-sync measures its own.
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1048576.0
def trim():
    # Freed memory given back to the system (glibc's malloc_trim), as crdt-sync does before its
    # replay and before its cold merge (COLD_NO_TRIM=1 skips the second, in both).
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
def merges(merge):
    # One cold merge, then `repeats` warm ones, each into a fresh document (as crdt-sync's --repeat).
    import os
    if not os.environ.get("COLD_NO_TRIM"):
        trim()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # read outside the timed merge, as crdt-sync does
    cold, out = merge()
    result["mergeColdFaults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    warm = []
    for _ in range(repeats):
        ms, again = merge()
        warm.append(ms)
        if again != out:
            raise SystemExit("a repeated merge gave another text")
    result["mergeCold"] = cold
    result["merge"] = statistics.median(warm) if warm else cold
    result["matches"] = out == trace["endContent"]
import gc
gc.collect()
trim()
base = rss_mb()
result = {}
if system == "yrs":
    import pycrdt
    # pycrdt indexes text by UTF-8 bytes; track the few multi-byte characters to convert offsets.
    wide = []  # sorted [position, extra bytes]
    def to_bytes(pos):
        return pos + sum(extra for p, extra in wide if p < pos)
    def deleted(pos, n):
        global wide
        wide = [[p - n if p >= pos + n else p, e] for p, e in wide if not (pos <= p < pos + n)]
    def inserted(pos, s):
        global wide
        wide = [[p + len(s) if p >= pos else p, e] for p, e in wide]
        for i, c in enumerate(s):
            extra = len(c.encode()) - 1
            if extra:
                wide.append([pos + i, extra])
        wide.sort()
    doc = pycrdt.Doc()
    text = doc.get("text", type=pycrdt.Text)
    t0 = time.perf_counter()
    with doc.transaction():
        if start_content:
            text.insert(0, start_content); inserted(0, start_content)
        for pos, n, s in patches:
            if n:
                b = to_bytes(pos)
                del text[b:to_bytes(pos + n)]
                deleted(pos, n)
            if s:
                text.insert(to_bytes(pos), s)
                inserted(pos, s)
    result["local"] = (time.perf_counter() - t0) * 1000
    result["memMB"] = rss_mb() - base
    update = doc.get_update()
    result["bytes"] = len(update)
    def merge():
        t0 = time.perf_counter()
        fresh = pycrdt.Doc()
        ftext = fresh.get("text", type=pycrdt.Text)
        fresh.apply_update(update)
        out = str(ftext)
        return (time.perf_counter() - t0) * 1000, out
    merges(merge)
else:
    import loro
    doc = loro.LoroDoc()
    text = doc.get_text("text")
    t0 = time.perf_counter()
    if start_content:
        text.insert(0, start_content)
    for pos, n, s in patches:
        if n:
            text.delete(pos, n)
        if s:
            text.insert(pos, s)
    doc.commit()
    result["local"] = (time.perf_counter() - t0) * 1000
    result["memMB"] = rss_mb() - base
    updates = doc.export(loro.ExportMode.Updates(loro.VersionVector()))
    result["bytes"] = len(updates)
    def merge():
        t0 = time.perf_counter()
        fresh = loro.LoroDoc()
        fresh.import_(updates)
        out = fresh.get_text("text").to_string()
        return (time.perf_counter() - t0) * 1000, out
    merges(merge)
    snapshot = doc.export(loro.ExportMode.Snapshot())
    t0 = time.perf_counter()
    loaded = loro.LoroDoc()
    loaded.import_(snapshot)
    loaded.get_text("text").to_string()
    result["load"] = (time.perf_counter() - t0) * 1000
    result["snapshotBytes"] = len(snapshot)
print(json.dumps(result))
'''


def ensure_venv():
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        print("creating", VENV, file=sys.stderr)
        venv.create(VENV, with_pip=True)
    check = subprocess.run([python, "-c", "import pycrdt, loro"], capture_output=True)
    if check.returncode != 0:
        print("installing pycrdt and loro from PyPI into", VENV, file=sys.stderr)
        subprocess.run([python, "-m", "pip", "install", "-q", "pycrdt", "loro"], check=True)
    return python


def versions(python):
    out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('pycrdt'), m.version('loro'))"],
                         capture_output=True, text=True).stdout.split()
    return {"yrs": "pycrdt " + out[0], "loro": "loro " + out[1]} if len(out) == 2 else {}


def ours_binary():
    binary = os.path.join(ROOT, ".build", "release", "crdt-sync")
    if not os.path.exists(binary):
        print("building crdt-sync in release mode", file=sys.stderr)
        subprocess.run(["swift", "build", "-c", "release", "--product", "crdt-sync"], cwd=ROOT, check=True)
    return binary


def run_ours(binary, path, repeats):
    out = subprocess.run([binary, "trace", "replay", path, "--json", "--repeat", str(repeats)],
                         capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise SystemExit("crdt-sync failed: " + out.stderr)
    r = json.loads(out.stdout)
    # local: the first (cold) replay, as the peers replay once (pycrdt takes minutes per replay).
    return {"local": r.get("localReplayColdMs", r["localReplayMs"]), "merge": r["mergeMs"],
            "mergeCold": r.get("mergeColdMs"), "mergeColdFaults": r.get("mergeColdFaults"), "bytes": r.get("encodedBytes"),
            "load": r.get("loadMs"), "memMB": r.get("peakMemoryMB"), "matches": r["matches"]}


def run_peer(python, system, path, repeats):
    out = subprocess.run([python, "-c", PEER_SCRIPT, system, path, str(repeats)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{system} failed: {out.stderr}")
    return json.loads(out.stdout)


def median(results, key):
    values = [r[key] for r in results if r.get(key) is not None]
    return statistics.median(values) if values else None


def fmt(value, key):
    if value is None:
        return "-"
    if key in ("bytes", "mergeColdFaults"):
        return f"{int(value):,}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="processes per system and trace (default 5)")
    parser.add_argument("--repeat", type=int, default=20,
                        help="warm merges per process after the cold one, each into a fresh document (default 20)")
    parser.add_argument("--traces", default="automerge-paper,rustcode,sveltecomponent,friendsforever")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--ours", help="the crdt-sync binary (default: build .build/release/crdt-sync)")
    args = parser.parse_args()

    python = ensure_venv()
    binary = args.ours or ours_binary()
    names = versions(python)
    if args.repeat < 1:
        raise SystemExit("--repeat must be at least 1")
    keys = ["local", "merge", "mergeCold", "mergeColdFaults", "bytes", "load", "memMB"]
    rows = []
    for trace in args.traces.split(","):
        path = os.path.join(TRACES, trace + ".json.gz")
        medians = {}
        for system in ["ours", "yrs", "loro"]:
            results = []
            for _ in range(args.runs):
                r = run_ours(binary, path, args.repeat) if system == "ours" else run_peer(python, system, path, args.repeat)
                if "skip" in r:
                    break
                results.append(r)
            if not results:
                continue
            medians[system] = {k: median(results, k) for k in keys}
            medians[system]["matches"] = all(r.get("matches", True) for r in results)
        for system, m in medians.items():
            row = [trace, "crdt-sync" if system == "ours" else names.get(system, system)]
            for k in keys:
                cell = fmt(m[k], k)
                if system != "ours" and m[k] and medians["ours"].get(k) is not None:
                    cell += f" ({medians['ours'][k] / m[k]:.2f}x)"
                row.append(cell)
            row.append("yes" if m["matches"] else "NO")
            rows.append(row)
    header = ["trace", "system", "local ms", "merge ms (warm)", "merge ms (cold)", "cold faults", "bytes", "load ms", "mem MB", "matches"]
    print(f"medians of {args.runs} runs (processes), each merging cold once then warm {args.repeat} times (median of those); "
          "(Nx) = ours / theirs, below 1 means crdt-sync is faster or smaller")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
        for row in [header] + rows:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
