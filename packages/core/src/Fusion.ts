/**
 * Graph rewrites that fuse chains into one kernel, as ggml backends do in graph_optimize: rms_norm * w,
 * (a + b) -> rms_norm [* w], mul_mat + bias, silu(x) * g -> swiglu, and where a backend asks for it a gated
 * FFN's two products with their swiglu. A rewrite is pure: it returns a new
 * graph whose `aliases` map the original tensors to the ones that now compute them, so plans built on it
 * still answer `get(originalOutput)`. A chain fuses only when its inner results have no other user and
 * are not outputs.
 *
 * @since 0.1.0
 */
import * as Graph from "./Graph.js"
import type { Op as OpT } from "./Op.js"
import { Op } from "./Op.js"
import * as Tensor from "./Tensor.js"

interface Fused {
  readonly op: OpT
  readonly src: ReadonlyArray<Tensor.Tensor>
  readonly absorbed: ReadonlyArray<Tensor.Tensor>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * whether a backend fuses a gated FFN's two products (gate and up weights over the same activations)
   * and their swiglu into one mul_mat_swiglu node; default: never (only a backend with a kernel says yes)
   */
  readonly mulMatSwiglu?: (gate: Tensor.Tensor, up: Tensor.Tensor, b: Tensor.Tensor) => boolean
}

/**
 * @since 0.1.0
 * @category rewrites
 */
export const optimize = (g: Graph.Graph, options: Options = {}): Graph.Graph => {
  const users = Graph.users(g)
  const outputs = Graph.outputIds(g)
  const inner = (t: Tensor.Tensor) => users.get(t.id) === 1 && !outputs.has(t.id) && t.viewSrc === undefined
  const rowsOk = (t: Tensor.Tensor) => Tensor.hasContiguousRows(t)

  const fusions = new Map<number, Fused>()
  const absorbed = new Set<number>()
  const claim = (root: Tensor.Tensor, f: Fused) => {
    if (f.absorbed.some((t) => absorbed.has(t.id) || fusions.has(t.id))) return false
    fusions.set(root.id, f)
    for (const t of f.absorbed) absorbed.add(t.id)
    return true
  }
  // visit consumers last-first so the longest chain claims its nodes
  for (let i = g.nodes.length - 1; i >= 0; i--) {
    const y = g.nodes[i]
    if (absorbed.has(y.id) || fusions.has(y.id)) continue
    const [s0, s1] = y.src
    if (y.op._tag === "Mul" && s0.op._tag === "RmsNorm" && inner(s0) && rowsOk(s0.src[0])) {
      const x = s0.src[0]
      const eps = s0.op.eps
      if (x.op._tag === "Add" && inner(x) && rowsOk(x.src[0])) {
        if (claim(y, { op: Op.AddRmsNorm({ eps, withMul: true }), src: [x.src[0], x.src[1], s1], absorbed: [s0, x] })) {
          continue
        }
      }
      if (claim(y, { op: Op.RmsNormMul({ eps }), src: [x, s1], absorbed: [s0] })) continue
    }
    if (y.op._tag === "RmsNorm" && s0.op._tag === "Add" && inner(s0) && rowsOk(s0.src[0])) {
      if (
        claim(y, { op: Op.AddRmsNorm({ eps: y.op.eps, withMul: false }), src: [s0.src[0], s0.src[1]], absorbed: [s0] })
      ) {
        continue
      }
    }
    if (
      y.op._tag === "Glu" && y.op.kind === "swiglu" && !y.op.swapped && y.src.length === 2 &&
      options.mulMatSwiglu !== undefined && s0.op._tag === "MulMat" && s1.op._tag === "MulMat" && inner(s0) &&
      inner(s1) && s0.src[1] === s1.src[1] && Tensor.sameShape(s0.src[0], s1.src[0]) &&
      s0.src[0].dtype === s1.src[0].dtype && options.mulMatSwiglu(s0.src[0], s1.src[0], s0.src[1])
    ) {
      if (claim(y, { op: Op.MulMatSwiglu(), src: [s0.src[0], s1.src[0], s0.src[1]], absorbed: [s0, s1] })) continue
    }
    if (y.op._tag === "Add" && s0.op._tag === "MulMat" && inner(s0)) {
      if (claim(y, { op: Op.MulMatAdd(), src: [s0.src[0], s0.src[1], s1], absorbed: [s0] })) continue
    }
    if (y.op._tag === "Mul") {
      for (const [s, gate] of [[s0, s1], [s1, s0]] as const) {
        if (
          s.op._tag === "Unary" && s.op.kind === "silu" && inner(s) && Tensor.sameShape(s.src[0], gate) &&
          s.src[0].dtype === gate.dtype && rowsOk(s.src[0]) && rowsOk(gate) && y.dtype === gate.dtype
        ) {
          if (claim(y, { op: Op.Glu({ kind: "swiglu", swapped: false }), src: [s.src[0], gate], absorbed: [s] })) break
        }
      }
    }
  }
  if (fusions.size === 0) return g

  const map = new Map<number, Tensor.Tensor>()
  const get = (t: Tensor.Tensor) => map.get(t.id) ?? t
  for (const n of g.nodes) {
    if (absorbed.has(n.id)) continue
    const f = fusions.get(n.id)
    const op = f?.op ?? n.op
    const src = (f?.src ?? n.src).map(get)
    if (f === undefined && src.every((s, k) => s === n.src[k])) continue
    let t: Tensor.Tensor
    if (n.viewSrc !== undefined) {
      const base = src[0]
      t = Tensor.unsafeView(base, n.ne, n.nb, n.viewOffset - base.viewOffset, op, src, n.dtype)
      Tensor.setFlag(t, n.flags)
    } else {
      t = Tensor.unsafeMake(n.name, n.dtype, n.ne, op, src, n.flags)
    }
    ;(t as { name: string }).name = n.name
    map.set(n.id, t)
  }
  const aliases = new Map<number, Tensor.Tensor>(g.aliases ?? [])
  for (const [id, t] of aliases) aliases.set(id, get(t))
  for (const [id, t] of map) aliases.set(id, t)
  return Graph.fromOutputs(g.outputs.map(get), aliases)
}
