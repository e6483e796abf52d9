#!/usr/bin/env bash
# On the GPU machine: what issues 18 and 20 still ask of an H200, each part one device call (a call runs 10
# minutes at most), each step's files back as one (steps.sh). Through the device tool with carry [".gpu-llm"]
# and needs_h200 (the most in the first call: an H200 may not come twice in a session):
#   bash .gpu-llm/run.sh bash .gpu-llm/h200.sh          the model table with this tree's defaults, then Dawn's
#                                                       bounds checks on (--robustness) at 8B q8_0 against
#                                                       the default without them, then flash_attn_ext
#                                                       against the chain, decode and prefill, the clocks
#                                                       sampled beside (the chain's earlier figures came at
#                                                       the idle clock: 1.08x prefill, 1.8x decode on an
#                                                       H100 once warmed, run fs) (~6 minutes)
#   PART=check bash ...                                  kernel-check's int8 forms at 32 lanes, then row groups
#                                                       in turn (the default since the session of 2026-12-05
#                                                       18:12) against a workgroup a group and a lower cap at
#                                                       8B q8_0 (last run: run fe, on an H100) (~5 minutes)
#   PART=18 bash ...                                     issue 18's matrix-vector cases of every decode type (the
#                                                       k-quants' int8 form not yet timed alone; 95-100 s cut
#                                                       them short in runs fd and ff), then its prompt products
#                                                       traced dispatch by dispatch, and again in a second
#                                                       process (q4_0 at 4096 rows ran at 61% of f16 in run
#                                                       ff, at 80% on an H100; some processes run q4_0's
#                                                       cases slow throughout: the GPU's clocks sampled
#                                                       beside both, clocked.sh), then the
#                                                       same products natively in the same design
#                                                       (bench/probes/qprefill-anchor.cu) (~6 minutes)
#   PART=20 bash ...                                     issue 20's last row, 8B q8_0 prefill (0.98x in run fv):
#                                                       the f16 copies of its weights alone against a plain
#                                                       f16 copy (traced 9.2 ms of a 56 ms prompt at ~2.5 TB/s
#                                                       in run dx, where element-wise ops reach 4.1), then the
#                                                       copy's wider form and the tiles that dequantize as
#                                                       they stage against the default, prompts only
#                                                       (~4 minutes)
cd "$(dirname "$0")/.."
case "${PART:-}" in
  20)
    bash .gpu-llm/steps.sh \
      "copy:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 120 node copy.mjs 14336 4096'" \
      "forms:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs --prefill-only' 'llm.mjs --prefill-only --copy-shape 8:wide' \
        'llm.mjs --prefill-only --q-prefill tiles'"
    ;;
  check)
    bash .gpu-llm/steps.sh "check:cd .gpu-llm && timeout 120 node check.mjs norms inturn plain stack merge" \
      "groups:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs' 'llm.mjs --mv-groups 0' 'llm.mjs --mv-groups 198'"
    ;;
  18)
    bash .gpu-llm/steps.sh \
      "mv:cd .gpu-llm && timeout 200 node run.mjs --no-peer --own-params --cases mv_q4_0,mv_q8_0,mv_q4_K,mv_q6_K" \
      "prefill18:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 100 node run.mjs --no-peer --own-params --profile --cases prefill_f16,prefill_q4_0,prefill_q8_0'" \
      "again:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 100 node run.mjs --no-peer --own-params --cases prefill_f16,prefill_q4_0,prefill_q8_0'" \
      "anchor:nvcc -O3 -arch=sm_90 -o /tmp/qprefill-anchor bench/probes/qprefill-anchor.cu && timeout 60 /tmp/qprefill-anchor"
    ;;
  *)
    bash .gpu-llm/steps.sh "table:bash .gpu-llm/table.sh" \
      "forms:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs' 'llm.mjs --robustness'" \
      "attention:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 100 node run.mjs --no-peer --cases flash_attn_decode,attn_chain_decode,flash_attn_prefill,attn_chain_prefill'"
    ;;
esac
