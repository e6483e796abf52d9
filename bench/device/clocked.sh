#!/usr/bin/env bash
# On the GPU machine: a command with the GPU's clocks, power and load sampled every 100 ms into
# $OUT/clocks.csv and each line of its output stamped with the time it came, so that a slow case shows
# whether the SM clock stayed low through it (q4_0's prompt products ran 3-5x slower in some processes,
# every dispatch of their cases alike, RESULTS.md). As a step of steps.sh:
#   "again:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && node run.mjs --no-peer --cases prefill_q4_0'"
set -uo pipefail
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 100 \
  > "${OUT:-.}/clocks.csv" 2>&1 &
sampler=$!
"$@" 2>&1 | while IFS= read -r line; do echo "$(date +%T.%N | cut -c1-12) $line"; done
status=${PIPESTATUS[0]}
kill "$sampler" 2>/dev/null
exit "$status"
