#!/usr/bin/env bash
# On the GPU machine: issue 20's model table, ours and llama.cpp's Vulkan backend on the same model files,
# each engine twice in turn (ours, llama.cpp, ours, llama.cpp) so that a slow spell of the machine shows as
# a difference between rounds. Through the device tool with carry [".gpu-llm"]:
#   bash .gpu-llm/run.sh bash .gpu-llm/table.sh [NAME...]
# writes ours.jsonl, llama.jsonl and times.txt under $OUT; `tsx bench/table.ts OURS LLAMA` makes the rows.
# OURS="--q-prefill tiles" runs ours with those flags of bench/llm.ts (an A/B's winner before it is the default).
set -uo pipefail
NAMES=$* source "$(dirname "$0")/common.sh" "1b-f16 1b-q8_0 1b-q4_0 8b-q8_0 8b-q4_0"
for round in 1 2; do
  # shellcheck disable=SC2086 # flags are words
  engine 110 node llm.mjs run $dir $names ${OURS:-} >> "$out/ours.jsonl" 2>> "$out/err.txt"
  mark "ours $round"
  engine 110 node bench.mjs $dir $names >> "$out/llama.jsonl" 2>> "$out/err.txt"
  mark "llama.cpp $round"
done
