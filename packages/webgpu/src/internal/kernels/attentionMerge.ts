/**
 * The decode form's merge of split partials: where attention's decode form splits the keys, each split
 * leaves its max, sum and output row in scratch after the result, and this second dispatch weighs them
 * (and the sink) into each head's output row.
 *
 * @internal
 */
import type * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { Kernel, KernelTarget, Operand, Param } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, SUBGROUP_LANES } from "./kernel.js"

/** @internal: the most splits of the keys (the merge keeps a weight per split in workgroup memory) */
export const MAX_SPLITS = 256
/** the merge's loads over the splits in flight together */
const MERGE_LOADS = 8

/**
 * @internal: WGSL storing output value e of head h, query row i and batch b from its weighed sum o, sum l
 * and max m, with the head's sink (operand s) where there is one
 */
export const finishRow = (sinks: boolean) => (o: string, l: string, m: string): string =>
  sinks
    ? `let sk = ld_s(ix_s(h, 0u, 0u, 0u));
    let mt = max(${m}, sk);
    let w = select(0.0, exp(${m} - mt), ${m} > neg_inf());
    let lt = ${l} * w + exp(sk - mt);
    st_d(ix_d(e, h, i, b), select(0.0, ${o} * w / lt, lt > 0.0));`
    : `st_d(ix_d(e, h, i, b), select(0.0, ${o} / ${l}, ${l} > 0.0));`

/** @internal: what the merge reads: the result with its scratch (d), the sinks, the split parameters */
export interface MergeArgs {
  readonly d: Operand
  readonly sinks: Tensor.Tensor | undefined
  readonly params: ReadonlyArray<Param>
  readonly Dv: number
  readonly splits: number
  /** lanes of the decode form's subgroups */
  readonly lanes: number
  /** the output rows (query rows x heads x batches): a workgroup each */
  readonly rows: number
  readonly target: KernelTarget
}

/**
 * @internal: the merge kernel: up to a subgroup's lanes of splits, a subgroup a head and a lane a split's
 * max and sum (subgroup reductions, no barriers; faster than the workgroup form, benchmarks/RESULTS.md,
 * choices: attention), each lane then weighing the splits' rows for its values; more splits, a workgroup
 * of 64 reducing the maxima and sums through workgroup memory
 */
export const mergeKernel = (args: MergeArgs): Kernel => {
  const { d, Dv, lanes: W, sinks, splits } = args
  const finish = finishRow(sinks !== undefined)
  return splits <= W
    ? KernelSpec.make({
      variant: { family: "flash_attn_merge", Dv, sinks: sinks !== undefined, lanes: W, splits },
      enables: ["subgroups"],
      operands: sinks ? [d, { name: "s", tensor: sinks }] : [d],
      params: args.params,
      workgroups: fold(args.rows, args.target.maxWorkgroups),
      main: `
${SUBGROUP_LANES}
${entry(W, true)}
  let t = wg_linear(wid, nwg);
  if (t >= P.d_ne1 * P.d_ne2 * P.d_ne3) { return; }
  let h = t % P.d_ne1;
  let i = (t / P.d_ne1) % P.d_ne2;
  let b = t / (P.d_ne1 * P.d_ne2);
  let p0 = ((b * P.d_ne2 + i) * P.d_ne1 + h) * ${splits}u;
  let base = P.d_o + P.scratch;
  let at = base + (p0 + min(sgl, ${splits - 1}u)) * 2u;
  let ms = select(neg_inf(), ld_d(at), sgl < ${splits}u);
  let mx = subgroupMax(ms);
  let wt = select(0.0, exp(ms - mx), ms > neg_inf());
  let l = subgroupAdd(select(0.0, ld_d(at + 1u) * wt, sgl < ${splits}u));
  // each split's weight from its lane, before the loop over the values (whose lanes may part ways)
  ${range(splits).map((s) => `let w${s} = subgroupShuffle(wt, ${s}u);`).join("\n  ")}
  let row = base + P.parts * 2u + p0 * ${Dv}u;
  for (var e = sgl; e < ${Dv}u; e += ${W}u) {
    ${range(splits).map((s) => `let v${s} = ld_d(row + ${s * Dv}u + e);`).join("\n    ")}
    let o = ${range(splits).map((s) => `v${s} * w${s}`).join(" + ")};
    ${finish("o", "l", "mx")}
  }
}`
    })
    : KernelSpec.make({
      variant: { family: "flash_attn_merge", Dv, sinks: sinks !== undefined, loads: MERGE_LOADS },
      operands: sinks ? [d, { name: "s", tensor: sinks }] : [d],
      params: args.params,
      workgroups: fold(args.rows, args.target.maxWorkgroups),
      main: `
var<workgroup> red: array<f32, 64>;
var<workgroup> wgt: array<f32, ${MAX_SPLITS}>;
${entry(64)}
  let t = wg_linear(wid, nwg);
  if (t >= P.d_ne1 * P.d_ne2 * P.d_ne3) { return; }
  let h = t % P.d_ne1;
  let i = (t / P.d_ne1) % P.d_ne2;
  let b = t / (P.d_ne1 * P.d_ne2);
  let p0 = ((b * P.d_ne2 + i) * P.d_ne1 + h) * P.nsplit;
  let base = P.d_o + P.scratch;
  // the splits' maxima and sums reduced by the workgroup, each split's weight kept in workgroup memory:
  // the output's loads over the splits are then independent of each other (a loop that read each
  // split's max before its output waited on one load after another)
  var m = neg_inf();
  for (var s = lid; s < P.nsplit; s += 64u) { m = max(m, ld_d(base + (p0 + s) * 2u)); }
  red[lid] = m;
  workgroupBarrier();
  for (var w = 32u; w > 0u; w >>= 1u) {
    if (lid < w) { red[lid] = max(red[lid], red[lid + w]); }
    workgroupBarrier();
  }
  let mx = red[0];
  workgroupBarrier();
  var ls = 0.0;
  for (var s = lid; s < P.nsplit; s += 64u) {
    let ms = ld_d(base + (p0 + s) * 2u);
    let wt = select(0.0, exp(ms - mx), ms > neg_inf());
    wgt[s] = wt;
    ls += ld_d(base + (p0 + s) * 2u + 1u) * wt;
  }
  red[lid] = ls;
  workgroupBarrier();
  for (var w = 32u; w > 0u; w >>= 1u) {
    if (lid < w) { red[lid] += red[lid + w]; }
    workgroupBarrier();
  }
  let l = red[0];
  for (var e = lid; e < ${Dv}u; e += 64u) {
    // the splits' rows read ${MERGE_LOADS} at a time, every load issued before its first use: a loop of one
    // load and its multiply-add waited on each load in turn
    var o = 0.0;
    let row = base + P.parts * 2u + p0 * ${Dv}u + e;
    var s = 0u;
    for (; s + ${MERGE_LOADS}u <= P.nsplit; s += ${MERGE_LOADS}u) {
      ${range(MERGE_LOADS).map((u) => `let v${u} = ld_d(row + (s + ${u}u) * ${Dv}u);`).join("\n      ")}
      o += ${range(MERGE_LOADS).map((u) => `v${u} * wgt[s + ${u}u]`).join(" + ")};
    }
    for (; s < P.nsplit; s++) { o += ld_d(row + s * ${Dv}u) * wgt[s]; }
    ${finish("o", "l", "mx")}
  }
}`
    })
}
