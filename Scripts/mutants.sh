#!/usr/bin/env bash
# Mutation testing of the simulator: applies each planted bug in Scripts/mutants/ (one at a time)
# to a scratch copy of the tree, builds crdt-sync, runs every scenario in Simulations/ (not the
# bench-* ones) and prints which scenario caught the bug, or that none did. Not part of CI.
#
#   Scripts/mutants.sh                      # every patch, 10 seeds per scenario
#   Scripts/mutants.sh 04 11                # the patches whose names start with 04 or 11
#   SEEDS=50 JOBS=2 CONFIG=release Scripts/mutants.sh
#   TREE=/tmp/scratch Scripts/mutants.sh    # reuse a scratch tree (and its .build) between runs
#   TREE=. Scripts/mutants.sh               # this tree itself (its shipped code must be unchanged)
#
# The scratch tree is a `git worktree` of HEAD plus the uncommitted changes to the simulator
# (so a check being written can be tried); its first build takes minutes, later ones rebuild one
# module. Each patch is reverted (`git checkout`) after its run. Exit status 1 when a bug escaped.
set -uo pipefail
cd "$(dirname "$0")/.."
source_dir="$(pwd)"
seeds="${SEEDS:-10}"
jobs="${JOBS:-2}"
config="${CONFIG:-debug}"
tree="${TREE:-${TMPDIR:-/tmp}/crdt-sync-mutants}"

if [ ! -d "$tree/.git" ] && [ ! -f "$tree/.git" ]; then
  git worktree add --detach "$tree" HEAD > /dev/null || exit 2
fi
# The simulator and the scenarios as they are here (committed or not), the shipped code as at HEAD.
if [ "$(cd "$tree" && pwd)" != "$source_dir" ]; then
  for dir in Sources/NotesSimulator Simulations; do
    rm -rf "${tree:?}/$dir" && cp -R "$source_dir/$dir" "$tree/$dir"
  done
fi
cd "$tree"
# Start clean: no patch left applied by an interrupted run.
git checkout -- Sources/NotesCRDT Sources/NotesStore Sources/NotesSync Sources/NotesRelay 2> /dev/null

patches=()
for patch in "$source_dir"/Scripts/mutants/*.patch; do
  name="$(basename "$patch" .patch)"
  if [ $# -eq 0 ]; then patches+=("$patch"); continue; fi
  for prefix in "$@"; do [[ "$name" == "$prefix"* ]] && patches+=("$patch"); done
done
scenarios=()
for file in Simulations/*.json; do
  case "$(basename "$file")" in bench-*) ;; *) scenarios+=("$file") ;; esac
done

log="${TMPDIR:-/tmp}/crdt-sync-mutants-build.log"
build() { swift build -c "$config" --product crdt-sync > "$log" 2>&1; }
echo "building the unmutated tree ($config)..."
build || { tail -20 "$log"; exit 2; }
binary="$tree/.build/$config/crdt-sync"

escaped=0
for patch in "${patches[@]}"; do
  name="$(basename "$patch" .patch)"
  # Only the patch's files are put back afterwards (the tree may hold other work).
  files=$(git apply --numstat "$patch" | cut -f3)
  if ! git apply "$patch"; then echo "$name: does not apply"; escaped=1; continue; fi
  if ! build; then
    echo "$name: does not build"; tail -5 "$log"
    git checkout -- $files; escaped=1; continue
  fi
  caught=()
  for scenario in "${scenarios[@]}"; do
    out="$("$binary" simulate "$scenario" --runs "$seeds" --no-shrink --jobs "$jobs" 2>&1)"
    if [ $? -ne 0 ]; then
      # The first problem reported, to say which check caught it.
      problem="$(printf '%s\n' "$out" | grep -m1 -E '^\s+- ' | sed -E 's/^\s+- //' | cut -c1-140)"
      failed="$(printf '%s\n' "$out" | grep -m1 -oE '[0-9]+ failed' || true)"
      # No summary: the process died (a precondition, a crash).
      [ -n "$failed" ] || problem="the simulator died: $(printf '%s\n' "$out" | grep -v '^\s*$' | tail -1 | cut -c1-120)"
      caught+=("$(basename "$scenario" .json) (${failed:-died}): $problem")
    fi
  done
  git checkout -- $files
  if [ ${#caught[@]} -eq 0 ]; then
    echo "$name: NOT CAUGHT ($seeds seeds per scenario)"
    escaped=1
  else
    echo "$name: caught by ${#caught[@]} scenario(s)"
    for line in "${caught[@]}"; do echo "    $line"; done
  fi
done
exit $escaped
