#!/usr/bin/env bash
# On the GPU machine: what issues 18 and 20 still ask of an H200, each part one device call (a call runs 10
# minutes at most), each step's files back as one (steps.sh). Through the device tool with carry [".gpu-llm"]
# and needs_h200 (the most in the first call: an H200 may not come twice in a session):
#   bash .gpu-llm/run.sh bash .gpu-llm/h200.sh          the model table with this tree's defaults, then the
#                                                       norm read twice at 8B q8_0 against the default that
#                                                       reads it once as b is rounded (timed on an H100 only,
#                                                       run fd; checked at 32 lanes there, run fe) (~7 minutes)
#   PART=check bash ...                                  kernel-check's int8 forms at 32 lanes, then row groups
#                                                       in turn (the default since the session of 2026-12-05
#                                                       18:12, timed on an H100 only) against a workgroup a
#                                                       group and a lower cap at 8B q8_0 (~5 minutes)
#   PART=18 bash ...                                     issue 18's standalone prompt products traced dispatch by
#                                                       dispatch, twice (on an H100, run fd, every dispatch of
#                                                       a q4_0 case ran 3-5x slower in one process and at
#                                                       q8_0's rate in the next), then the matrix-vector cases
#                                                       of every decode type (the k-quants' int8 form not yet
#                                                       timed alone; 100 s cut them short in run fd) (~5 minutes)
cd "$(dirname "$0")/.."
case "${PART:-}" in
  check)
    bash .gpu-llm/steps.sh "check:cd .gpu-llm && timeout 120 node check.mjs norms inturn plain stack merge" \
      "groups:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs' 'llm.mjs --mv-groups 0' 'llm.mjs --mv-groups 198'"
    ;;
  18)
    bash .gpu-llm/steps.sh \
      "prefill18:cd .gpu-llm && for i in 1 2; do timeout 100 node run.mjs --no-peer --own-params --profile --cases prefill_f16,prefill_q4_0,prefill_q8_0; done" \
      "mv:cd .gpu-llm && timeout 200 node run.mjs --no-peer --own-params --cases mv_q4_0,mv_q8_0,mv_q4_K,mv_q6_K"
    ;;
  *)
    bash .gpu-llm/steps.sh "table:bash .gpu-llm/table.sh" \
      "forms:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs' 'llm.mjs --norm-twice'"
    ;;
esac
