#!/usr/bin/env python3
"""What Yrs' merge decodes: its v1 update with deleted text collected (pycrdt's default) and kept.

    Benchmarks/.venv/bin/python Benchmarks/yrs_gc.py Tests/Fixtures/traces/rustcode.json.gz

For a sequential trace, replays it in pycrdt twice, once with `skip_gc=False` (what compare.py
measures) and once with `skip_gc=True` (deleted items keep their text, as crdt-sync's log keeps
every insert's), and prints per case the update's bytes, the same deflated, the trace's inserted
and surviving UTF-8 bytes, and the median of 20 warm merges into a fresh document (ms) after a cold
one. Run it with the venv compare.py makes.
"""
import gzip, json, statistics, sys, time, zlib

import pycrdt

path = sys.argv[1]
with gzip.open(path) as f:
    trace = json.load(f)
if trace.get("kind") == "concurrent":
    raise SystemExit("a concurrent trace: compare.py replays those in crdt-sync only")
patches = [p for t in trace["txns"] for p in t["patches"]]
start = trace.get("startContent", "")
inserted = sum(len(s.encode()) for _, _, s in patches) + len(start.encode())
for skip in (False, True):
    doc = pycrdt.Doc(skip_gc=skip)
    text = doc.get("text", type=pycrdt.Text)
    # pycrdt indexes text by UTF-8 bytes: the text is kept here too, to convert offsets.
    s = start
    with doc.transaction():
        if start:
            text.insert(0, start)
        for pos, n, ins in patches:
            if n:
                b = len(s[:pos].encode())
                del text[b:b + len(s[pos:pos + n].encode())]
                s = s[:pos] + s[pos + n:]
            if ins:
                text.insert(len(s[:pos].encode()), ins)
                s = s[:pos] + ins + s[pos:]
    update = doc.get_update()
    times = []
    for _ in range(21):
        t0 = time.perf_counter()
        fresh = pycrdt.Doc(skip_gc=skip)
        ftext = fresh.get("text", type=pycrdt.Text)
        fresh.apply_update(update)
        out = str(ftext)
        times.append((time.perf_counter() - t0) * 1000)
    if out != trace["endContent"]:
        raise SystemExit("the merged text differs from endContent")
    print(json.dumps({"trace": path.split("/")[-1], "skip_gc": skip, "update_bytes": len(update),
                      "deflated": len(zlib.compress(update, 9)), "inserted_utf8": inserted,
                      "final_utf8": len(trace["endContent"].encode()),
                      "merge_ms_warm": round(statistics.median(times[1:]), 3), "merge_ms_cold": round(times[0], 3)}))
