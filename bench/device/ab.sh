#!/usr/bin/env bash
# On the GPU machine: an A/B of two bundles of bench/llm.ts (two trees, or one tree with two sets of flags)
# on the same model files, each twice in turn (A, B, A, B) so that a slow spell shows as a difference
# between rounds. Through the device tool with carry [".gpu-llm"]:
#   bash .gpu-llm/run.sh bash .gpu-llm/ab.sh "llm-base.mjs" "llm.mjs" 1b-q4_0 8b-q4_0
#   bash .gpu-llm/run.sh bash .gpu-llm/ab.sh "llm.mjs --apart-stores" "llm.mjs" 1b-q4_0
# (llm-base.mjs: `BASE=<commit> bash bench/device/pack.sh`) writes a.jsonl, b.jsonl and times.txt under $OUT.
set -uo pipefail
a=$1
b=$2
shift 2
NAMES=$* source "$(dirname "$0")/common.sh" "1b-q4_0 8b-q4_0"
# shellcheck disable=SC2086 # each side is a bundle and its flags
for round in 1 2; do
  set -- $a
  engine 150 node "$1" run $dir $names "${@:2}" >> "$out/a.jsonl" 2>> "$out/err.txt"
  mark "a $round"
  set -- $b
  engine 150 node "$1" run $dir $names "${@:2}" >> "$out/b.jsonl" 2>> "$out/err.txt"
  mark "b $round"
done
