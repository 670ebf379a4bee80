#!/bin/sh
# Generates crdt-sync's man page with swift-argument-parser's GenerateManual plugin (from the
# same definitions as --help) into a temporary folder, and checks it is not empty and documents
# every subcommand (and their own subcommands, e.g. `tag rename`). Exit 0 when it does.
#
#   Scripts/check-manual.sh [--configuration debug|release] [--keep DIR]
#
# The plugin builds every product (in debug by default here: it reuses `swift build`'s) and writes
# to .build/plugins/GenerateManual/outputs/crdt-sync/; the page is copied from there.
set -eu
configuration=debug
keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --configuration) configuration="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        *) echo "usage: $0 [--configuration debug|release] [--keep DIR]" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
out="$(mktemp -d "${TMPDIR:-/tmp}/crdt-sync-manual.XXXXXX")"
trap 'rm -rf "$out"' EXIT

# A fixed date, so that the page is the same from one run to the next.
swift package generate-manual --configuration "$configuration" --date 2025-01-01 >"$out/plugin.log" 2>&1 || {
    cat "$out/plugin.log" >&2
    echo "check-manual: the GenerateManual plugin failed" >&2
    exit 1
}
generated="$(swift build --configuration "$configuration" --show-bin-path)/../../plugins/GenerateManual/outputs/crdt-sync/crdt-sync.1"
[ -f "$generated" ] || generated=".build/plugins/GenerateManual/outputs/crdt-sync/crdt-sync.1"
[ -s "$generated" ] || { echo "check-manual: no man page at $generated (or it is empty)" >&2; exit 1; }
cp "$generated" "$out/crdt-sync.1"
page="$out/crdt-sync.1"

binary="$(swift build --configuration "$configuration" --show-bin-path)/crdt-sync"
# The names under SUBCOMMANDS: in a command's --help ("note (default)" is "note").
subcommands() {
    "$binary" "$@" --help | awk '/^SUBCOMMANDS:/ { on = 1; next } on && /^[^ ]/ { on = 0 } on && /^  [a-z]/ && !/^  See / { print $1 }'
}
missing=0
count=0
for command in $(subcommands); do
    [ "$command" = help ] && continue
    count=$((count + 1))
    grep -q "^\.It Em $command\$" "$page" || { echo "check-manual: the man page does not document '$command'" >&2; missing=1; }
    for sub in $(subcommands "$command"); do
        [ "$sub" = help ] && continue
        grep -q "^\.It Em $sub\$" "$page" || { echo "check-manual: the man page does not document '$command $sub'" >&2; missing=1; }
    done
done
[ "$count" -gt 0 ] || { echo "check-manual: found no subcommands in crdt-sync --help" >&2; exit 1; }
[ "$missing" -eq 0 ] || exit 1
if [ -n "$keep" ]; then mkdir -p "$keep" && cp "$page" "$keep/"; fi
echo "check-manual: crdt-sync.1 ($(wc -l <"$page") lines) documents all $count subcommands"
