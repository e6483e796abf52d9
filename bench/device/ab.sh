#!/usr/bin/env bash
# On the GPU machine: an A/B of two bundles of bench/llm.ts (two trees, or one tree with two sets of flags,
# or node's own options before the bundle) on the same model files, each twice in turn (A, B, A, B) so that
# a slow spell shows as a difference between rounds. Through the device tool with carry [".gpu-llm"]:
#   bash .gpu-llm/run.sh bash .gpu-llm/ab.sh "llm-base.mjs" "llm.mjs" 1b-q4_0 8b-q4_0
#   bash .gpu-llm/run.sh bash .gpu-llm/ab.sh "llm.mjs --apart-stores" "llm.mjs" 1b-q4_0
#   bash .gpu-llm/run.sh bash .gpu-llm/ab.sh "llm.mjs" "--max-semi-space-size=64 llm.mjs" 1b-q4_0
# (llm-base.mjs: `BASE=<commit> bash bench/device/pack.sh`) writes a.jsonl, b.jsonl and times.txt under $OUT.
set -uo pipefail
a=$1
b=$2
shift 2
NAMES=$* source "$(dirname "$0")/common.sh" "1b-q4_0 8b-q4_0"
# one side: node's options, the bundle (the first word ending in .mjs), then the bundle's flags
side() {
  local words=($1) i
  for i in "${!words[@]}"; do [[ ${words[i]} == *.mjs ]] && break; done
  # shellcheck disable=SC2086 # names are words
  engine 150 node "${words[@]:0:i}" "${words[i]}" run $dir $names "${words[@]:i+1}"
}
for round in 1 2; do
  side "$a" >> "$out/a.jsonl" 2>> "$out/err.txt"
  mark "a $round"
  side "$b" >> "$out/b.jsonl" 2>> "$out/err.txt"
  mark "b $round"
done
