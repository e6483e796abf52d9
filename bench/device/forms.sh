#!/usr/bin/env bash
# On the GPU machine: several forms of bench/llm.ts (sets of flags, or bundles) on the same model files, each
# form in turn twice over (F1, F2, ..., F1, F2, ...) so that a slow spell shows as a difference between rounds;
# ab.sh for more than two. Through the device tool with carry [".gpu-llm"], as a step of steps.sh (its files
# then come back as one: a call returns a handful, and run er lost a step's forms.jsonl so):
#   bash .gpu-llm/run.sh bash .gpu-llm/steps.sh \
#     "forms:bash .gpu-llm/forms.sh '8b-q8_0 8b-q4_0' 'llm.mjs --prefill-only' 'llm.mjs --prefill-only --sums-apart'"
# writes forms.jsonl (each line the form's index as "form" beside llm.mjs's fields) and times.txt under $OUT;
# `tsx bench/forms.ts FILE` sets the forms side by side, round by round.
set -uo pipefail
models=$1
shift
NAMES=$models source "$(dirname "$0")/common.sh" "8b-q8_0"
for round in 1 2; do
  i=0
  for form in "$@"; do
    words=($form)
    for j in "${!words[@]}"; do [[ ${words[j]} == *.mjs ]] && break; done
    # shellcheck disable=SC2086 # names are words
    engine 150 node "${words[@]:0:j}" "${words[j]}" run $dir $names "${words[@]:j+1}" 2>> "$out/err.txt" |
      sed "s/^{/{\"form\":$i,/" >> "$out/forms.jsonl"
    mark "form $i round $round"
    i=$((i + 1))
  done
done
