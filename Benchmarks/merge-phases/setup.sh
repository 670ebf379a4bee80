#!/bin/bash
# Links NotesCRDT, Deflate and CZlib and the trace reader into this package (a package cannot
# name sources outside its folder), then builds it:
#   Benchmarks/merge-phases/setup.sh && .build/release/Phase ../../Tests/Fixtures/traces/rustcode.json.gz 40
#   ./cg.sh .build/release/Phase rustcode 2 /tmp/cg.out   # instructions per merge, by phase (valgrind)
# Modes (third argument): none = wall time per phase over N merges; "cg" = the same, reading the
# encoded history cached in /tmp by an earlier run; "local" = N local replays; "stats" = what the
# history holds; "cold" = each merge of the process apart, with its page faults (see main.swift).
set -e
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
mkdir -p Sources
for m in NotesCRDT Deflate CZlib; do ln -sfn "$root/Sources/$m" "Sources/$m"; done
ln -sfn "$root/Sources/EditingTraces/EditingTrace.swift" Sources/Phase/EditingTrace.swift
ln -sfn "$root/Sources/EditingTraces/Gzip.swift" Sources/Phase/Gzip.swift
ln -sfn "$root/Sources/EditingTraces/LocalReplay.swift" Sources/Phase/LocalReplay.swift
swift build -c release
