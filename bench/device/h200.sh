#!/usr/bin/env bash
# On the GPU machine: what issues 18 and 20 still ask of an H200, in one device call (~9 minutes): the model
# table with this tree's defaults, then the forms whose defaults were chosen on an H100 or not yet timed, at
# 8B q8_0 on the same files (prompt and decode each), each step's files back as one (steps.sh). Through the
# device tool with carry [".gpu-llm"] and needs_h200:
#   bash .gpu-llm/run.sh bash .gpu-llm/h200.sh          (TABLE_ONLY=1: the table alone, ~6 minutes)
cd "$(dirname "$0")/.."
bash .gpu-llm/steps.sh "table:bash .gpu-llm/table.sh"
[ "${TABLE_ONLY:-}" = 1 ] && exit 0
bash .gpu-llm/steps.sh \
  "forms:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs' 'llm.mjs --values-after' 'llm.mjs --q-prefill tiles' 'llm.mjs --copy-loads words'"
