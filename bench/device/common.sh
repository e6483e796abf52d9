# Sourced by table.sh and ab.sh on the GPU machine: from the folder of the bundles, $names (the arguments,
# else the default given as $1), the models written into $dir, and `mark LABEL` timing the steps into
# $out/times.txt.
cd "$(dirname "${BASH_SOURCE[1]}")"
names=${NAMES:-$1}
dir=/tmp/models
out=${OUT:-.}
start=$(date +%s)
mark() { echo "$1 $(($(date +%s) - start))s" >> "$out/times.txt"; }
# shellcheck disable=SC2086 # names are words
node llm.mjs models $dir $names 2>> "$out/models.txt"
mark models
