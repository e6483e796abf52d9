#!/usr/bin/env bash
# On the GPU machine: what issues 18 and 20 still ask of an H200, in one device call (~7 minutes): the model
# table with this tree's defaults, then the forms not yet timed on an H200 (the int8 form's prefetch in
# plain products or stacks at 8B q8_0; the q4_0 copy at 8 vec4s a thread with 16-byte stores, faster alone,
# at 8B q4_0) and issue 18's standalone quantized prompt products traced dispatch by dispatch (q4_0's ran at
# a fifth of q8_0's rate in run ev), each step's files back as one (steps.sh). Through the device tool with
# carry [".gpu-llm"] and needs_h200:
#   bash .gpu-llm/run.sh bash .gpu-llm/h200.sh          (TABLE_ONLY=1: the table alone, ~5 minutes)
cd "$(dirname "$0")/.."
bash .gpu-llm/steps.sh "table:bash .gpu-llm/table.sh"
[ "${TABLE_ONLY:-}" = 1 ] && exit 0
bash .gpu-llm/steps.sh \
  "forms:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs' 'llm.mjs --mv-prefetch-in plain' 'llm.mjs --mv-prefetch-in stack'" \
  "copy-shape:bash .gpu-llm/forms.sh 8b-q4_0 'llm.mjs --prefill-only' 'llm.mjs --prefill-only --copy-shape 8:wide'" \
  "prefill18:cd .gpu-llm && timeout 100 node run.mjs --no-peer --own-params --profile --cases prefill_q4_0,prefill_q8_0"
