/**
 * Rotary position embedding: one thread per pair of a row, so an in-place rope reads both elements
 * before it writes either. Mode 0 rotates adjacent pairs; modes 2 (neox), 8 (mrope) and 40 (imrope) the
 * two halves of the first n_dims, the multi-section modes with one of a token's four positions per pair.
 * Frequency factors divide a pair's angle; YaRN mixes interpolated and extrapolated angles over a ramp
 * and scales the magnitude. The rest of each row is copied.
 *
 * @internal
 */
import * as Op from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { Kernel, KernelTarget, Operand, Param } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, f32, u32, WG } from "./kernel.js"

type RopeOp = Op.RopeParams

/** WGSL: which of a token's four positions pair `i` takes (ggml's section rules of modes 8 and 40) */
const sectionOf = (mode: number) =>
  mode === 8
    ? `fn section(i: u32) -> u32 {
  let sec = i % (P.s0 + P.s1 + P.s2 + P.s3);
  if (sec < P.s0) { return 0u; }
  if (sec < P.s0 + P.s1) { return 1u; }
  if (sec < P.s0 + P.s1 + P.s2) { return 2u; }
  return 3u;
}`
    : `fn section(i: u32) -> u32 {
  let sec = i % (P.s0 + P.s1 + P.s2 + P.s3);
  if (sec % 3u == 1u && sec < 3u * P.s1) { return 1u; }
  if (sec % 3u == 2u && sec < 3u * P.s2) { return 2u; }
  if (sec % 3u == 0u && sec < 3u * P.s0) { return 0u; }
  return 3u;
}`

/** @internal */
export const rope = (node: Tensor.Tensor, op: RopeOp, target: KernelTarget): Kernel => {
  const operands: Array<Operand> = [
    { name: "a", tensor: node.src[0] },
    { name: "p", tensor: node.src[1] },
    { name: "d", tensor: node }
  ]
  if (op.hasFreqFactors) operands.push({ name: "f", tensor: node.src[2] })
  return ropeKernel(op, operands, node, "rope", "d", "", (e, v) => `st_d(ix_d(${e}, i1, i2, i3), ${v});`, target)
}

/**
 * @internal: rope_set_rows, the rotated rows stored as rows of the table (a key cache) at the indices: the
 * rope's shape [D, heads, tokens] walked, element e of head h of token t going to element e + h D of the
 * table's row idx[t] (a row outside the table dropped, as set_rows drops it). rope_set_rows_kv (`values`)
 * also stores the rows of its last source into the table before them at the same indices (a layer's
 * values), on threads after the rope's: one dispatch for a cache's two stores; with `query` (a rope node of
 * the same op over the same positions: a layer's q) that rope too, on threads after the values'
 */
export const ropeSetRows = (
  node: Tensor.Tensor,
  op: RopeOp,
  target: KernelTarget,
  values = false,
  query?: Tensor.Tensor
): Kernel => {
  const [, input, positions] = node.src
  const at = op.hasFreqFactors ? 4 : 3
  const operands: Array<Operand> = [
    { name: "a", tensor: input },
    { name: "p", tensor: positions },
    { name: "d", tensor: node },
    { name: "x", tensor: node.src[at] }
  ]
  if (op.hasFreqFactors) operands.push({ name: "f", tensor: node.src[3] })
  if (values) {
    operands.push({ name: "dv", tensor: node.src[at + 1], writes: true }, { name: "y", tensor: node.src[at + 2] })
  }
  // a query's rope (a rope node of the same op and positions) on threads after the values' (program.ts)
  if (query !== undefined) {
    operands.push({ name: "aq", tensor: query.src[0] }, { name: "dq", tensor: query, writes: true })
  }
  const store = `fn store_row(e: u32, h: u32, t: u32, v: f32) {
  let r = u32(ldi_x(ix_x(t, 0u, 0u, 0u)));
  if (r < P.d_ne1) { st_d(ix_d(e + h * P.a_ne0, r, 0u, 0u), v); }
}`
  const rows = values ? node.src[at + 2] : undefined
  const valueThreads = rows === undefined ? 0 : Math.ceil(rows.ne[0] / 2) * rows.ne[1]
  const queryThreads = query === undefined ? 0 : Math.ceil(query.ne[0] / 2) * Tensor.nrows(query)
  // thread t past the rope's: values 2j and 2j + 1 of row r stored in the table's row idx[r]
  const valueCode = rows === undefined ? "" : `let vp = (P.y_ne0 + 1u) / 2u;
    if (t < vp * P.y_ne1) {
      let r = t / vp;
      let row = u32(ldi_x(ix_x(r, 0u, 0u, 0u)));
      if (row < P.dv_ne1) {
        for (var e = 2u * (t % vp); e < min(2u * (t % vp) + 2u, P.y_ne0); e++) {
          st_dv(ix_dv(e, row, 0u, 0u), ld_y(ix_y(e, r, 0u, 0u)));
        }
      }
    }`
  // thread t past the values': pair j of the query's row, as rope_pair rotates the keys' pairs
  const queryCode = query === undefined ? "" : `let u = t - ${valueThreads}u;
    let qp = (P.aq_ne0 + 1u) / 2u;
    if (t >= ${valueThreads}u && u < qp * P.aq_ne1 * P.aq_ne2 * P.aq_ne3) {
      let r1 = u / qp;
      rope_pair(u % qp, r1 % P.aq_ne1, (r1 / P.aq_ne1) % P.aq_ne2, r1 / (P.aq_ne1 * P.aq_ne2));
    }`
  const queryDecls = query === undefined ? "" : `
fn rope_pair(j: u32, i1: u32, i2: u32, i3: u32) {
${ropeBody(op, "aq", "aq", (e, v) => `st_dq(ix_dq(${e}, i1, i2, i3), ${v});`)}
}`
  return ropeKernel(
    op,
    operands,
    input,
    values ? "rope_set_rows_kv" : "rope_set_rows",
    "a",
    store + queryDecls,
    (e, v) => `store_row(${e}, i1, i2, ${v});`,
    target,
    valueThreads + queryThreads === 0
      ? undefined
      : { threads: valueThreads + queryThreads, code: [valueCode, queryCode].filter((c) => c !== "").join("\n    ") },
    query !== undefined
  )
}

/**
 * @internal: a rope's angle as WGSL, fn rope_cs(j, pos) -> (cos, sin) of pair j at position `pos`, both
 * times the magnitude (frequency factors from operand f, YaRN's mix), and the parameters it reads
 */
export const ropeAngle = (op: RopeOp): { readonly params: ReadonlyArray<Param>; readonly code: string } => {
  const yarn = op.extFactor !== 0
  const { high, low } = yarn ? Op.ropeYarnCorrDims(op) : { high: 0, low: 0 }
  const factor = op.hasFreqFactors ? " / ld_f(ix_f(j, 0u, 0u, 0u))" : ""
  const angle = yarn
    ? `
  let theta_int = P.freq_scale * theta_ext;
  let ramp = 1.0 - clamp((f32(j) - P.corr_low) / max(0.001, P.corr_high - P.corr_low), 0.0, 1.0);
  let mix = ramp * P.ext_factor;
  let theta = theta_int * (1.0 - mix) + theta_ext * mix;
  let mscale = P.yarn_mscale;`
    : `
  let theta = P.freq_scale * theta_ext;
  let mscale = P.attn_factor;`
  return {
    params: [
      f32("freq_base", op.freqBase),
      f32("freq_scale", op.freqScale),
      u32("n_dims", op.nDims),
      f32("attn_factor", op.attnFactor),
      ...(yarn
        ? [
          f32("ext_factor", op.extFactor),
          f32("corr_low", low),
          f32("corr_high", high),
          f32("yarn_mscale", op.attnFactor * (1 + 0.1 * Math.log(1 / op.freqScale)))
        ]
        : [])
    ],
    code: `fn rope_cs(j: u32, pos: f32) -> vec2<f32> {
  let theta_ext = pos * pow(P.freq_base, -2.0 * f32(j) / f32(P.n_dims))${factor};${angle}
  return vec2<f32>(cos(theta) * mscale, sin(theta) * mscale);
}`
  }
}

/**
 * the rope kernel over the shape of operand `it` (`shape` its tensor), storing each value through
 * `store(element, value)` (after module-scope `decls`)
 */
const ropeKernel = (
  op: RopeOp,
  operands: ReadonlyArray<Operand>,
  shape: Tensor.Tensor,
  family: string,
  it: string,
  decls: string,
  store: (e: string, v: string) => string,
  target: KernelTarget,
  tail?: { readonly threads: number; readonly code: string },
  queries = false
): Kernel => {
  const pairs = Math.ceil(shape.ne[0] / 2)
  const multi = op.mode === 8 || op.mode === 40
  const yarn = op.extFactor !== 0
  const angle = ropeAngle(op)
  const params = [...angle.params, ...(multi ? op.sections.map((s, i) => u32(`s${i}`, s)) : [])]
  return KernelSpec.make({
    variant: { family, mode: op.mode, freqFactors: op.hasFreqFactors, yarn, ...(queries ? { queries } : {}) },
    operands,
    workgroups: fold(Math.ceil((pairs * Tensor.nrows(shape) + (tail?.threads ?? 0)) / WG), target.maxWorkgroups),
    params,
    main: `
${multi ? sectionOf(op.mode) : ""}
${angle.code}
${decls}
${entry()}
  let idx = wg_linear(wid, nwg) * ${WG}u + lid;
  let pairs = (P.${it}_ne0 + 1u) / 2u;
  let total = pairs * P.${it}_ne1 * P.${it}_ne2 * P.${it}_ne3;
  if (idx >= total) {${
      tail === undefined ? "" : `
    let t = idx - total;
    ${tail.code}`
    }
    return;
  }
  let j = idx % pairs;
  let r1 = idx / pairs;
  let i1 = r1 % P.${it}_ne1;
  let i2 = (r1 / P.${it}_ne1) % P.${it}_ne2;
  let i3 = r1 / (P.${it}_ne1 * P.${it}_ne2);
${ropeBody(op, "a", it, store)}
}`
  })
}

/**
 * WGSL: pair j of row (i1, i2, i3) of operand `src` rotated (the dimensions past n_dims copied), each value
 * stored through `store(element, value)`; `shape` names the operand whose extents the row has
 */
const ropeBody = (op: RopeOp, src: string, shape: string, store: (e: string, v: string) => string) => {
  const multi = op.mode === 8 || op.mode === 40
  const [j0, j1] = op.mode === 0 ? ["2u * j", "2u * j + 1u"] : ["j", "j + half"]
  const position = multi ? `i2 + section(j) * P.${shape}_ne2` : "i2"
  return `  let half = P.n_dims / 2u;
  if (j < half) {
    let j0 = ${j0};
    let j1 = ${j1};
    let cs = rope_cs(j, f32(ldi_p(ix_p(${position}, 0u, 0u, 0u))));
    let c = cs.x;
    let s = cs.y;
    let x0 = ld_${src}(ix_${src}(j0, i1, i2, i3));
    let x1 = ld_${src}(ix_${src}(j1, i1, i2, i3));
    ${store("j0", "x0 * c - x1 * s")}
    ${store("j1", "x0 * s + x1 * c")}
  } else {
    for (var e = 2u * j; e < min(2u * j + 2u, P.${shape}_ne0); e++) {
      if (e >= P.n_dims) { ${store("e", `ld_${src}(ix_${src}(e, i1, i2, i3))`)} }
    }
  }`
}
