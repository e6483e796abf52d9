#!/usr/bin/env bash
# On the GPU machine: what issues 18 and 20 still ask of an H200, in parts, each step's files back as one
# (steps.sh). Through the device tool with carry [".gpu-llm"], asking for the nvidia-h200 kind (an H100 may
# come: branch on `nvidia-smi --query-gpu=name`; needs_h200 is for work that cannot fit an H100), as
#   PART="PART..." bash .gpu-llm/run.sh bash .gpu-llm/h200.sh
# with parts run in turn in one call (a call runs 10 minutes at most; an H200 may not come twice in a
# session, so put the most in the first):
#   close (~10 minutes)              what closing issues 20 and 18 still waits for, the most first: table.sh alone
#                                    (~4 minutes), then issue 18's prompt products against f16 activations, flash
#                                    attention against the chain and the matrix-vector cases of every decode type,
#                                    last the prompt-product and prompt-attention anchors natively (each step's
#                                    file is kept if the call's limit cuts a later one); on an H200 only (other
#                                    cards return at once; ANY_CARD=1 runs it anyway)
#   table (the default, ~7 minutes)  the model table with this tree's defaults; at 8B q8_0 the prompt's forms
#                                    these defaults replaced (--attention chain, --matrix-order rows,
#                                    --no-fill-tiles); flash_attn_ext against the chain, decode and prefill, the
#                                    clocks sampled beside
#   check (~5 minutes)               kernel-check's int8 forms at 32 lanes; row groups in turn against a
#                                    workgroup a group and a lower cap at 8B q8_0
#   18 (~4.5 minutes)                issue 18's matrix-vector cases of every decode type; its prompt products
#                                    against f16 activations, the clocks sampled beside; the same products
#                                    natively (bench/probes/qprefill-anchor.cu)
#   20 (~4 minutes)                  issue 20's 8B q8_0 prompt: the f16 copies of its weights alone against a
#                                    plain f16 copy; the copy's wider form and the tiles that dequantize as they
#                                    stage against the default, prompts only
#   attn (~3 minutes)                kernel-check's prompt attention (with key splits); decode attention in
#                                    other forms at 4096 keys (`--fa SPLITS:BLOCK:SUBGROUPS[:keys|keys1|dims]
#                                    [:HEADS]`), each beside the chain in its process; prompt attention alone at
#                                    512 and 2048 queries (bench/probes/prompt-attention-probe.ts); then prompt
#                                    attention's design natively (bench/probes/attention-anchor.cu)
#   verify (~4 minutes)              this tree's correctness on the card: kernel-check's every section (the
#                                    kernels lavapipe lacks, against the CPU) and the 20 oracle models against
#                                    llama.cpp's answers; any card
#   browser (~1 minute)              prompts as an adapter without subgroup matrices runs them (a browser's:
#                                    --no-subgroup-matrices, register tiles): 1B q8_0 and q4_0 weights copied
#                                    into f16 first against the scalar tiles that dequantize as they load; any
#                                    card
# Figures from these parts, and what each decided: benchmarks/RESULTS.md.
# PART="18 20" or "20 attn" fits one call.
cd "$(dirname "$0")/.."
for part in ${PART:-table}; do
  case "$part" in
    close)
      card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
      if [[ $card != *H200* && -z ${ANY_CARD:-} ]]; then
        echo "h200.sh: close is for an H200, this is $card (ANY_CARD=1 runs it anyway)" | tee "$OUT/card.txt"
        continue
      fi
      bash .gpu-llm/steps.sh "table:bash .gpu-llm/table.sh" \
        "prefill18:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 100 node run.mjs --no-peer --own-params --cases prefill_f16,prefill_q4_0,prefill_q8_0'" \
        "attention:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 80 node run.mjs --no-peer --cases flash_attn_decode,attn_chain_decode,flash_attn_prefill,attn_chain_prefill'" \
        "mv:cd .gpu-llm && timeout 120 node run.mjs --no-peer --own-params --cases mv_q4_0,mv_q8_0,mv_q4_K,mv_q6_K" \
        "qanchor:nvcc -O3 -arch=sm_90 -o /tmp/qprefill-anchor bench/probes/qprefill-anchor.cu && timeout 50 /tmp/qprefill-anchor" \
        "attnanchor:nvcc -O3 -arch=sm_90 -o /tmp/attention-anchor bench/probes/attention-anchor.cu && timeout 50 /tmp/attention-anchor"
      ;;
    table)
      bash .gpu-llm/steps.sh "table:bash .gpu-llm/table.sh" \
        "forms:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs --prefill-only' 'llm.mjs --prefill-only --attention chain' \
          'llm.mjs --prefill-only --matrix-order rows' 'llm.mjs --prefill-only --no-fill-tiles'" \
        "attention:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 100 node run.mjs --no-peer --cases flash_attn_decode,attn_chain_decode,flash_attn_prefill,attn_chain_prefill'"
      ;;
    check)
      bash .gpu-llm/steps.sh "check:cd .gpu-llm && timeout 120 node check.mjs norms inturn plain stack merge" \
        "groups:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs' 'llm.mjs --mv-groups 0' 'llm.mjs --mv-groups 198'"
      ;;
    18)
      bash .gpu-llm/steps.sh \
        "mv:cd .gpu-llm && timeout 200 node run.mjs --no-peer --own-params --cases mv_q4_0,mv_q8_0,mv_q4_K,mv_q6_K" \
        "prefill18:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 100 node run.mjs --no-peer --own-params --cases prefill_f16,prefill_q4_0,prefill_q8_0'" \
        "anchor:nvcc -O3 -arch=sm_90 -o /tmp/qprefill-anchor bench/probes/qprefill-anchor.cu && timeout 60 /tmp/qprefill-anchor"
      ;;
    20)
      bash .gpu-llm/steps.sh \
        "copy:bash .gpu-llm/clocked.sh bash -c 'cd .gpu-llm && timeout 120 node copy.mjs 14336 4096'" \
        "copyforms:bash .gpu-llm/forms.sh 8b-q8_0 'llm.mjs --prefill-only' 'llm.mjs --prefill-only --copy-shape 8:wide' \
          'llm.mjs --prefill-only --q-prefill tiles'"
      ;;
    attn)
      bash .gpu-llm/steps.sh "checkprefill:cd .gpu-llm && timeout 120 node check.mjs prefill" \
        "decodeforms:cd .gpu-llm && for f in 0:0:0 16:0:4 64:0:4 32:0:8 32:0:2 32:0:4:keys:2 \
        32:0:4:keys1; do echo \"== \$f\"; timeout 40 node run.mjs --no-peer --cases flash_attn_decode,attn_chain_decode \
        --fa \$f 2>&1 | grep '_decode '; done" \
        "promptattn:cd .gpu-llm && timeout 100 node prompt-attention.mjs 512 2048 --layouts model --chain" \
        "attnanchor:nvcc -O3 -arch=sm_90 -o /tmp/attention-anchor bench/probes/attention-anchor.cu && timeout 90 /tmp/attention-anchor"
      ;;
    verify)
      bash .gpu-llm/steps.sh "check:cd .gpu-llm && timeout 300 node check.mjs" \
        "oracle:timeout 200 node .gpu-llm/oracle.mjs packages/llm/test/oracle/llama.cpp.json"
      ;;
    browser)
      bash .gpu-llm/steps.sh "browser:bash .gpu-llm/forms.sh '1b-q8_0 1b-q4_0' \
        'llm.mjs --prefill-only --no-subgroup-matrices --q-prefill tiles' \
        'llm.mjs --prefill-only --no-subgroup-matrices --q-prefill copy'"
      ;;
    *)
      echo "h200.sh: no part $part (close, table, check, 18, 20, attn, verify, browser)" >&2
      exit 2
      ;;
  esac
done
