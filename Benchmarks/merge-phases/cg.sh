#!/bin/bash
# usage: cg.sh BINARY TRACE N OUT  -> per-merge instruction counts by phase
[ -n "$NORUN" ] || valgrind --tool=callgrind --toggle-collect='*phase*' --callgrind-out-file=$4 $1 $(cd "$(dirname "$0")/../.." && pwd)/Tests/Fixtures/traces/$2.json.gz $3 cg >/dev/null 2>&1
callgrind_annotate --inclusive=yes $4 2>/dev/null | python3 -c '
import sys,re
n=int(sys.argv[1]); out={}
for l in sys.stdin:
    m=re.match(r"\s*([\d,]+)\s+\(.*?\)\s+Sources/Phase/main.swift:\S*phase(Inflate|Decode|Apply|Read)",l)
    if m: out[m.group(2)]=int(m.group(1).replace(",",""))/n/1e6
tot=sum(out.values())
print(sys.argv[2], " ".join("%s %.2fM"%(k,v) for k,v in out.items()), "total %.2fM"%tot)
' $3 $2
