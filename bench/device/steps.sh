#!/usr/bin/env bash
# On the GPU machine: several measurements in one device call, each step's files gathered into one file
# under $OUT (a call returns a handful of files: run eg lost the A/Bs after its eighth). Each step is
# "NAME:COMMAND", run from the project's root with OUT set to a folder of its own; then $OUT/NAME.txt holds
# its output and each of its files after an "== FILE" line. Through the device tool with carry [".gpu-llm"]:
#   bash .gpu-llm/run.sh bash .gpu-llm/steps.sh \
#     "check:cd .gpu-llm && timeout 300 node check.mjs" \
#     "lanes:bash .gpu-llm/ab.sh 'llm.mjs --attention-lanes keys1' llm.mjs 8b-q4_0" \
#     "table:bash .gpu-llm/table.sh"
set -uo pipefail
shopt -s nullglob
final=$OUT
for step in "$@"; do
  name=${step%%:*}
  dir=/tmp/steps/$name
  mkdir -p "$dir"
  {
    (OUT=$dir bash -c "${step#*:}") 2>&1
    for f in "$dir"/*; do
      echo "== $(basename "$f")"
      cat "$f"
    done
  } > "$final/$name.txt"
done
