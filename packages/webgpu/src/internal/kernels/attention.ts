/**
 * Fused attention (flash_attn_ext): softmax(scale * q k^T [soft-capped] + slope * mask) v without the
 * score matrix in memory. One workgroup per query row and head walks the keys of the head's KV group in
 * blocks of one key per invocation, with an online softmax: a block's scores raise the running max, the
 * running sum and the output accumulators are rescaled by exp(old max - new max). A sink (one logit per
 * head) starts the max and the sum. The result is [Dv, H, n_q] (ggml's layout).
 *
 * @internal
 */
import type * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { AttentionOp } from "./attentionDecode.js"
import { decodeKernel, decodePlan, queryOf, scratchBytes as decodeScratch, shared, widens } from "./attentionDecode.js"
import * as Matrix from "./attentionMatrix.js"
import * as Tiles from "./attentionTiles.js"
import type { Kernel, KernelTarget, Operand } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry } from "./kernel.js"
import { alibiSlope, workgroupReductions } from "./reduce.js"

/** keys per block (one per invocation): 64 on GPUs, 32 where every invocation costs (software adapters) */
const threadsFor = (target: KernelTarget) => (target.software === true ? 32 : 64)

/**
 * which form takes a flash_attn_ext node: the decode form (its plan), the matrix forms (the one-pass one where
 * it applies, else the two-pass one), or the row form; the kernel and its scratch both ask here
 */
const formOf = (node: Tensor.Tensor, op: AttentionOp, target: KernelTarget) => {
  const plan = decodePlan(node, target)
  if (plan !== undefined) return { form: "decode" as const, plan }
  // the matrix forms read q as it is: a rotated q takes the row form
  if (op._tag !== "FlashAttnExt" || !Matrix.offered(node, target)) return { form: "rows" as const }
  return { form: Tiles.applies(node, op, target) ? "one-pass" as const : "two-pass" as const }
}

/**
 * @internal: the bytes of scratch a flash_attn_ext node's kernel keeps after its result: the decode form's
 * splits' partials, or the one-pass prompt form's where it splits the keys
 */
export const scratchBytes = (node: Tensor.Tensor, target: KernelTarget): number => {
  const chosen = formOf(node, node.op as AttentionOp, target)
  return chosen.form === "decode"
    ? decodeScratch(node, target)
    : chosen.form === "one-pass"
    ? Tiles.scratchBytes(node, target)
    : 0
}

/** @internal: flash_attn_ext's kernel: the decode form where it applies (falling back where its scratch is missing) */
export const flashAttnExt = (
  node: Tensor.Tensor,
  op: AttentionOp,
  target: KernelTarget
): Kernel => {
  const chosen = formOf(node, op, target)
  const rows = rowsKernel(node, op, target)
  if (chosen.form === "rows") return rows
  // (a matrix form's op is flash_attn_ext: formOf says so, the tag check lets the compiler see it)
  if (chosen.form !== "decode" && op._tag === "FlashAttnExt") {
    const { k, mask, params, q, sinks, v } = shared(node, op)
    const operands: Array<Operand> = [{ name: "q", tensor: q }, { name: "k", tensor: k }, { name: "v", tensor: v }, {
      name: "d",
      tensor: node
    }]
    if (mask) operands.push({ name: "m", tensor: mask })
    if (sinks) operands.push({ name: "s", tensor: sinks })
    // the two-pass form where the one-pass one does not apply or its bindings turn out unaligned, the row
    // form where the two-pass one's tiles do not fit
    const twoPass = Matrix.fits(node, target) ? Matrix.flashAttnMatrix(node, op, operands, params) : rows
    return chosen.form === "one-pass"
      ? Tiles.flashAttnTiles(node, op, operands, params, target, twoPass)
      : twoPass
  }
  if (chosen.form !== "decode") return rows
  const { plan } = chosen
  const scalar = decodeKernel(node, op, { ...plan, across: "dims" }, target, rows, false)
  return widens(node.src[1]) && widens(node.src[2]) ? decodeKernel(node, op, plan, target, scalar, true) : scalar
}

/**
 * @internal: whether the WebGPU device rotates q as its attention reads it (rope_flash_attn_ext): where the
 * decode form computes the attention (a decoding step's few query rows) and the rope turns pairs of one
 * position (modes 0 and 2): a dispatch a layer fewer
 */
export const fusesRope = (target: KernelTarget) => (attention: Tensor.Tensor, rope: Tensor.Tensor): boolean =>
  rope.op._tag === "Rope" && (rope.op.mode === 0 || rope.op.mode === 2) && decodePlan(attention, target) !== undefined

/** the row form: one workgroup per query row and head */
const rowsKernel = (
  node: Tensor.Tensor,
  op: AttentionOp,
  target: KernelTarget
): Kernel => {
  const { k, mask, params, q, sinks, v } = shared(node, op)
  const D = q.ne[0]
  const Dv = v.ne[0]
  const wg = threadsFor(target)
  const perThread = Math.ceil(Dv / wg)
  const subgroups = target.subgroups === true
  const softcap = op.logitSoftcap !== 0
  const operands: Array<Operand> = [
    { name: "q", tensor: q },
    { name: "k", tensor: k },
    { name: "v", tensor: v },
    { name: "d", tensor: node }
  ]
  if (mask) operands.push({ name: "m", tensor: mask })
  if (sinks) operands.push({ name: "s", tensor: sinks })
  const query = queryOf(node, op)
  operands.push(...query.operands)
  return KernelSpec.make({
    variant: {
      family: "flash_attn",
      ...(op._tag === "RopeFlashAttnExt"
        ? { rope: op.rope.mode, freqFactors: op.rope.hasFreqFactors, yarn: op.rope.extFactor !== 0 }
        : {}),
      D,
      Dv,
      mask: mask !== undefined,
      sinks: sinks !== undefined,
      softcap,
      subgroups,
      threads: wg
    },
    ...(subgroups ? { enables: ["subgroups"] } : {}),
    operands,
    params: [...params, ...query.params],
    workgroups: fold(q.ne[1] * q.ne[2] * q.ne[3], target.maxWorkgroups),
    main: `
${workgroupReductions(wg, subgroups)}
${query.code}
var<workgroup> qs: array<f32, ${D}>;
var<workgroup> ps: array<f32, ${wg}>;
${entry(wg, subgroups)}
  let qi = wg_linear(wid, nwg);
  if (qi >= P.q_ne1 * P.q_ne2 * P.q_ne3) { return; }
  let i = qi % P.q_ne1;
  let h = (qi / P.q_ne1) % P.q_ne2;
  let b = qi / (P.q_ne1 * P.q_ne2);
  // grouped-query attention: heads share KV heads in runs of H / H_kv
  let g = h / (P.q_ne2 / P.k_ne2);
  let nkv = P.k_ne1;
  for (var e = lid; e < ${D}u; e += RW) { qs[e] = q_at(e, i, h, b); }
  workgroupBarrier();
${alibiSlope("h")}
  var mx = ${sinks ? "ld_s(ix_s(h, 0u, 0u, 0u))" : "neg_inf()"};
  var sum = ${sinks ? "1.0" : "0.0"};
  var acc: array<f32, ${perThread}>;
  for (var j0 = 0u; j0 < nkv; j0 += RW) {
    let j = j0 + lid;
    var sc = neg_inf();
    if (j < nkv) {
      let kb = ix_k(0u, j, g, b % P.k_ne3);
      var dot = 0.0;
      for (var e = 0u; e < ${D}u; e++) { dot += qs[e] * ld_k(kb + e * P.k_nb0); }
      sc = dot * P.scale;${softcap ? "\n      sc = P.softcap * tanh_s(sc / P.softcap);" : ""}${
      mask ? "\n      sc += slope * ld_m(ix_m(j, i, h % P.m_ne2, b % P.m_ne3));" : ""
    }
    }
    let nm = max(mx, reduce_max(lid, sc));
    var p = 0.0;
    if (sc > neg_inf()) { p = exp(sc - nm); }
    var corr = 0.0;
    if (mx > neg_inf()) { corr = exp(mx - nm); }
    ps[lid] = p;
    sum = sum * corr + reduce_sum(lid, p);
    let count = min(RW, nkv - j0);
    for (var r = 0u; r < ${perThread}u; r++) {
      let e = lid + r * RW;
      if (e < ${Dv}u) {
        var o = acc[r] * corr;
        let vb = ix_v(e, j0, g, b % P.v_ne3);
        for (var jj = 0u; jj < count; jj++) { o += ps[jj] * ld_v(vb + jj * P.v_nb1); }
        acc[r] = o;
      }
    }
    mx = nm;
    workgroupBarrier();
  }
  for (var r = 0u; r < ${perThread}u; r++) {
    let e = lid + r * RW;
    if (e < ${Dv}u) { st_d(ix_d(e, h, i, b), select(0.0, acc[r] / sum, sum > 0.0)); }
  }
}`
  })
}
