/**
 * Fused attention on subgroup matrices (prefill: many query rows). A workgroup of 4 subgroups takes 64
 * query rows of one head, each subgroup 16, with the rows' Q held as f16 left matrices. The keys go by in
 * blocks of 32, K (and V) staged in workgroup memory as f16 and shared by the subgroups. Two passes over
 * the keys: the first computes S = Q K^T per block and keeps each row's max and sum (online), the second
 * computes S again and multiplies P = exp(S - max) / sum with V into result matrices that stay in
 * registers: subgroup matrices offer no per-row access, so the output is never rescaled (S costs twice).
 * Lanes work on S through workgroup memory, two lanes per row. The one-pass form (attentionTiles.ts) runs
 * where K, V and the mask load 8 f16 at a time, with this one as its fallback; both share the pieces below.
 *
 * @internal
 */
import type { Op } from "@effect-gpu/core/Op"
import type * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { Kernel, KernelTarget, Operand, Param } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, SUBGROUP_LANES } from "./kernel.js"
import { alibiSlope } from "./reduce.js"

/** @internal: the fragment types both matrix forms load */
export const LEFT = "subgroup_matrix_left<f16, 16, 16>, row_major"
/** @internal */
export const RIGHT_COLUMNS = "subgroup_matrix_right<f16, 16, 16>, col_major"
/** @internal */
export const RIGHT_ROWS = "subgroup_matrix_right<f16, 16, 16>, row_major"
/** @internal */
export const RESULT = "subgroup_matrix_result<f32, 16, 16>"

/** query rows per workgroup (16 per subgroup), keys per block */
const ROWS = 64
const KEYS = 32
const THREADS = 128

/** the workgroup memory the kernel takes for head sizes D and Dv */
const sharedBytes = (D: number, Dv: number) =>
  ROWS * D * 2 + KEYS * D * 2 + KEYS * Dv * 2 + 4 * 16 * KEYS * 4 + 4 * 16 * KEYS * 2

/**
 * @internal: whether a matrix form (this one or the one-pass form) may take a flash_attn_ext node:
 * subgroup matrices, f16 K and V, head sizes multiples of 16 up to 128
 */
export const offered = (node: Tensor.Tensor, target: KernelTarget): boolean => {
  const [q, k, v] = node.src
  const D = q.ne[0]
  const Dv = v.ne[0]
  return target.subgroupMatrix === true && target.f16 && k.dtype === "f16" && v.dtype === "f16" &&
    D % 16 === 0 && Dv % 16 === 0 && D <= 128 && Dv <= 128
}

/** @internal: whether this form's tiles fit the device's workgroup memory */
export const fits = (node: Tensor.Tensor, target: KernelTarget): boolean =>
  sharedBytes(node.src[0].ne[0], node.src[2].ne[0]) <= (target.workgroupStorage ?? 16384)

/**
 * @internal: the entry of both matrix forms, with what each workgroup works out first: its head `h`, batch
 * `b`, first query row `i0` and KV head `g`; the subgroup `sg`, each lane's row `row` and half `hc` of the
 * block's keys (two lanes a row), its query row `i`, and the head's ALiBi `slope`; with `splits`, the
 * workgroup's split of the keys `sp` first
 */
export const tileEntry = (rows: number, threads: number, splits = 1): string =>
  `${SUBGROUP_LANES}
fn slope_of(h: u32) -> f32 {${alibiSlope("h")}
  return slope;
}
${entry(threads, true)}
  let nq = P.q_ne1;
  let nkv = P.k_ne1;
  let tiles = (nq + ${rows - 1}u) / ${rows}u;${
    splits > 1
      ? `
  // the workgroup's split of the keys (sp), then its query tile as without splits
  let ts = wg_linear(wid, nwg);
  let sp = ts % ${splits}u;
  let t = ts / ${splits}u;`
      : `
  let t = wg_linear(wid, nwg);`
  }
  if (t >= tiles * P.q_ne2 * P.q_ne3) { return; }
  let h = (t / tiles) % P.q_ne2;
  let b = t / (tiles * P.q_ne2);
  let i0 = (t % tiles) * ${rows}u;
  // grouped-query attention: heads share KV heads in runs of H / H_kv
  let g = h / (P.q_ne2 / P.k_ne2);
  let kb3 = b % P.k_ne3;
  let vb3 = b % P.v_ne3;
  let sg = lid / 32u;
  let row = sgl / 2u;
  let hc = sgl % 2u;
  let i = i0 + sg * 16u + row;
  let slope = slope_of(h);`

/**
 * @internal: O += P V for a block of `keys` keys: P (f16, the subgroup's rows of Ps, `stride` apart) by V's
 * staged rows of `dv` values (Vs, rows `vStride` f16 apart, whose elements hold `unit` f16 each), into the
 * result fragments o0, o1, ...
 */
export const multiplyPV = (keys: number, dv: number, unit: 1 | 4, stride = keys, vStride = dv): string =>
  range(keys / 16).map((kk) =>
    `    {
      let p = subgroupMatrixLoad<${LEFT}>(&Ps, sg * ${16 * stride}u + ${kk * 16}u, ${stride}u);
${
      range(dv / 16).map((n) =>
        `      o${n} = subgroupMatrixMultiplyAccumulate(p, subgroupMatrixLoad<${RIGHT_ROWS}>(&Vs, ${
          (kk * 16 * vStride + n * 16) / unit
        }u, ${vStride / unit}u), o${n});`
      ).join("\n")
    }
    }`
  ).join("\n")

/** @internal: a matrix form's kernel from its variant and WGSL: the extensions, waivers and grid both share */
export const matrixKernel = (
  variant: Kernel["variant"],
  operands: ReadonlyArray<Operand>,
  params: ReadonlyArray<Param>,
  q: Tensor.Tensor,
  rows: number,
  main: string,
  splits = 1
): Kernel =>
  KernelSpec.make({
    variant,
    enables: ["f16", "subgroups", "chromium_experimental_subgroup_matrix"],
    // per-subgroup offsets (lid / 32), the lane pairs' shuffles and the one-pass form's rescale are uniform
    // within each subgroup, which Tint cannot prove
    diagnosticsOff: ["chromium.subgroup_matrix_uniformity", "subgroup_uniformity"],
    operands,
    params,
    workgroups: fold(Math.ceil(q.ne[1] / rows) * q.ne[2] * q.ne[3] * splits, 65535),
    main
  })

/** @internal */
export const flashAttnMatrix = (
  node: Tensor.Tensor,
  op: Extract<Op, { _tag: "FlashAttnExt" }>,
  operands: ReadonlyArray<Operand>,
  params: ReadonlyArray<Param>
): Kernel => {
  const [q, , v] = node.src
  const D = q.ne[0]
  const Dv = v.ne[0]
  const mask = op.hasMask
  const sinks = op.hasSinks
  const softcap = op.logitSoftcap !== 0
  const stage = (tile: string, width: number, load: string) =>
    `for (var x = lid; x < ${KEYS * width}u; x += ${THREADS}u) {
      let j = j0 + x / ${width}u;
      var val = 0.0;
      if (j < nkv) { val = ${load}; }
      ${tile}[x] = f16(val);
    }`
  // one block of keys: S for the subgroup's 16 rows, then the lanes' 16 scores each (scaled, capped,
  // masked; keys past the end are -inf) and the block's max per row
  const scores = `
    // from an explicit zero: a result matrix declared in the loop kept the last block's sums on the H200
    var s0 = zero;
    var s1 = zero;
${
    range(D / 16).map((s) =>
      `    s0 = subgroupMatrixMultiplyAccumulate(q${s}, subgroupMatrixLoad<${RIGHT_COLUMNS}>(&Ks, ${
        s * 16
      }u, ${D}u), s0);
    s1 = subgroupMatrixMultiplyAccumulate(q${s}, subgroupMatrixLoad<${RIGHT_COLUMNS}>(&Ks, ${
        16 * D + s * 16
      }u, ${D}u), s1);`
    ).join("\n")
  }
    subgroupMatrixStore<row_major>(&Ss, sg * ${16 * KEYS}u, s0, ${KEYS}u);
    subgroupMatrixStore<row_major>(&Ss, sg * ${16 * KEYS}u + 16u, s1, ${KEYS}u);
    workgroupBarrier();
    var sv: array<f32, 16>;
    var bm = neg_inf();
${
    range(16).map((c) =>
      `    {
      let jj = hc * 16u + ${c}u;
      let j = j0 + jj;
      var x = Ss[(sg * 16u + row) * ${KEYS}u + jj] * P.scale;${
        softcap ? "\n      x = P.softcap * tanh_s(x / P.softcap);" : ""
      }
      if (j >= nkv) { x = neg_inf(); }${
        mask ? "\n      else if (i < nq) { x += slope * ld_m(ix_m(j, i, h % P.m_ne2, b % P.m_ne3)); }" : ""
      }
      sv[${c}] = x;
      bm = max(bm, x);
    }`
    ).join("\n")
  }
    bm = max(bm, subgroupShuffleXor(bm, 1u));`
  const passMax = `
  for (var j0 = 0u; j0 < nkv; j0 += ${KEYS}u) {
    workgroupBarrier();
    ${stage("Ks", D, "ld_k(ix_k(x % " + D + "u, j, g, kb3))")}
    workgroupBarrier();
${scores}
    let mn = max(m, bm);
    var ps = 0.0;
${range(16).map((c) => `    ps += select(0.0, exp(sv[${c}] - mn), sv[${c}] > neg_inf());`).join("\n")}
    ps += subgroupShuffleXor(ps, 1u);
    l = l * select(0.0, exp(m - mn), m > neg_inf()) + ps;
    m = mn;
  }`
  const passOut = `
  for (var j0 = 0u; j0 < nkv; j0 += ${KEYS}u) {
    workgroupBarrier();
    ${stage("Ks", D, "ld_k(ix_k(x % " + D + "u, j, g, kb3))")}
    ${stage("Vs", Dv, "ld_v(ix_v(x % " + Dv + "u, j, g, vb3))")}
    workgroupBarrier();
${scores}
${
    range(16).map((c) =>
      `    Ps[(sg * 16u + row) * ${KEYS}u + hc * 16u + ${c}u] = f16(select(0.0, exp(sv[${c}] - m) / l, sv[${c}] > neg_inf() && l > 0.0));`
    ).join("\n")
  }
    workgroupBarrier();
${multiplyPV(KEYS, Dv, 1)}
  }`
  const store = range(Dv / 16).map((n) =>
    `  workgroupBarrier();
  subgroupMatrixStore<row_major>(&Ss, sg * ${16 * KEYS}u, o${n}, 16u);
  workgroupBarrier();
  for (var x = sgl; x < 256u; x += 32u) {
    let ii = i0 + sg * 16u + x / 16u;
    if (ii < nq) { st_d(ix_d(${n * 16}u + x % 16u, h, ii, b), Ss[sg * ${16 * KEYS}u + x]); }
  }`
  ).join("\n")
  return matrixKernel(
    { family: "flash_attn_mma", D, Dv, mask, sinks, softcap },
    operands,
    params,
    q,
    ROWS,
    `
var<workgroup> Qs: array<f16, ${ROWS * D}>;
var<workgroup> Ks: array<f16, ${KEYS * D}>;
var<workgroup> Vs: array<f16, ${KEYS * Dv}>;
var<workgroup> Ss: array<f32, ${4 * 16 * KEYS}>;
var<workgroup> Ps: array<f16, ${4 * 16 * KEYS}>;
${tileEntry(ROWS, THREADS)}
  for (var x = lid; x < ${ROWS * D}u; x += ${THREADS}u) {
    let ii = i0 + x / ${D}u;
    var val = 0.0;
    if (ii < nq) { val = ld_q(ix_q(x % ${D}u, ii, h, b)); }
    Qs[x] = f16(val);
  }
  workgroupBarrier();
${
      range(D / 16).map((s) => `  let q${s} = subgroupMatrixLoad<${LEFT}>(&Qs, sg * ${16 * D}u + ${s * 16}u, ${D}u);`)
        .join("\n")
    }
  var zero: ${RESULT};
  var m = ${sinks ? "ld_s(ix_s(h, 0u, 0u, 0u))" : "neg_inf()"};
  var l = ${sinks ? "1.0" : "0.0"};
${passMax}
${range(Dv / 16).map((n) => `  var o${n}: ${RESULT};`).join("\n")}
${passOut}
${store}
}`
  )
}
