# Sourced by table.sh and ab.sh on the GPU machine: from the folder of the bundles, $names (the arguments,
# else the default given as $1), the models written into $dir, `mark LABEL` timing the steps into
# $out/times.txt, and `engine SECONDS CMD...` running a measurement under a time limit, with PIN=... (e.g.
# PIN="taskset -c 0-7") before it where asked: both engines' 1B decode moved between processes (RESULTS.md).
cd "$(dirname "${BASH_SOURCE[1]}")"
names=${NAMES:-$1}
dir=/tmp/models
out=${OUT:-.}
start=$(date +%s)
mark() { echo "$1 $(($(date +%s) - start))s" >> "$out/times.txt"; }
# shellcheck disable=SC2086 # PIN is a command and its words
engine() { timeout "$1" ${PIN:-} "${@:2}"; }
# the models not yet written (several A/Bs in one call share them)
missing=$(for n in $names; do [ -s "$dir/$n.gguf" ] || echo "$n"; done)
# shellcheck disable=SC2086 # names are words
[ -z "$missing" ] || node llm.mjs models $dir $missing 2>> "$out/models.txt"
mark models
