/**
 * Graph rewrites that fuse chains into one kernel, as ggml backends do in graph_optimize: rms_norm * w,
 * (a + b) -> rms_norm [* w], mul_mat + bias, silu(x) * g -> swiglu; and where a backend asks for them (see
 * Options) a gated FFN's products with their swiglu, products sharing their activations stacked, a residual
 * sum kept beside its next norm, rope stored by its set_rows (and a layer's values by the same node), q's rope
 * read by its attention, a product stored permuted as the contiguous copy reading it would have it, and
 * products' activations written in f16. A rewrite is pure: it returns a new
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
  /** the first source is seen with its dimensions 1 and 2 swapped (a permute made when the graph is rebuilt) */
  readonly swapFirst?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * whether a backend fuses a gated FFN's two products (gate and up weights over the same activations)
   * and their swiglu into one mul_mat_swiglu node; also one product over gate's and up's weights stacked
   * (a prompt's), whose rows' two halves swiglu reads: then `gate` and `up` are views of the stack's two
   * halves; default: never (only a backend with a kernel says yes)
   */
  readonly mulMatSwiglu?: (gate: Tensor.Tensor, up: Tensor.Tensor, b: Tensor.Tensor) => boolean
  /**
   * whether a backend computes the products of several weights over the same activations (attention's q,
   * k and v) as one mul_mat_stack node, the products becoming views of its rows; asked only of products
   * of one column (a decoding step's); default: never
   */
  readonly mulMatStack?: (weights: ReadonlyArray<Tensor.Tensor>, b: Tensor.Tensor) => boolean
  /**
   * whether a backend computes a sum that has other users and the rms_norm * weight of it as one
   * add_rms_norm_keep node (a decoding step's residual stream and its next norm), both becoming views of
   * it; one row only; default: never
   */
  readonly addRmsNormKeep?: boolean
  /**
   * whether a backend computes a sum of many rows that has other users (a prompt's residual stream) and the
   * rms_norm * weight of it as one add_rms_norm_store node, the sum stored over its first source where
   * nothing reads that source after it (the stream before the add): the sum becomes a view of it; default:
   * never
   */
  readonly addRmsNormStore?: boolean
  /**
   * whether a backend computes a one-row rms_norm * weight inside the products that read it (`readers`, as
   * the graph has them before fusing): the sum before it is then not kept beside it (`addRmsNormKeep`) but
   * left to the product that makes it (mul_mat_add), and the norm to its readers; default: never
   */
  readonly normsInProducts?: (norm: Tensor.Tensor, readers: ReadonlyArray<Tensor.Tensor>) => boolean
  /**
   * whether a backend computes a sum of the residual stream and a product of several rows (x + W a, a
   * prompt's layer output) as mul_mat_add, the residual as the bias; of one row always; default: never
   */
  readonly residualProducts?: boolean
  /** whether a backend rotates rows as it stores them (rope then set_rows, a key cache's write); default: never */
  readonly ropeSetRows?: boolean
  /**
   * whether a backend's rope_set_rows also stores the rows of another set_rows at the same indices (a
   * cache's values beside its keys) as one rope_set_rows_kv node, that set_rows becoming a view of its
   * table after it; needs `ropeSetRows`; default: never
   */
  readonly ropeSetRowsKv?: boolean
  /**
   * whether a backend rotates q as its attention reads it (rope, permuted, then flash_attn_ext: a decoding
   * step's queries) as one rope_flash_attn_ext node; default: never
   */
  readonly ropeAttention?: (attention: Tensor.Tensor, rope: Tensor.Tensor) => boolean
  /**
   * whether a backend takes a product's activations (mul_mat's b) in f16 (its kernel rounds them to f16
   * anyway): where every user of a norm's, a swiglu's or a soft_max's result is such a product, that result
   * is written in f16, half the bytes for the products to load; default: never
   */
  readonly halfActivations?: (product: Tensor.Tensor) => boolean
  /**
   * whether a backend stores a product permuted as the contiguous copy reading it would have it (cont of a
   * permute of mul_mat keeping axis 0, each read by nothing else: attention's V·P) as one mul_mat_permuted
   * node; default: never
   */
  readonly mulMatPermuted?: (product: Tensor.Tensor, axes: readonly [number, number, number, number]) => boolean
}

/**
 * the ops whose result may be written in f16 for the products that read it (the activations' producers;
 * soft_max's probabilities for attention's V·P, where attention is a chain)
 */
const HALF_PRODUCERS: ReadonlySet<OpT["_tag"]> = new Set([
  "RmsNorm",
  "RmsNormMul",
  "AddRmsNorm",
  "AddRmsNormStore",
  "Glu",
  "MulMatSwiglu",
  "SoftMax"
])

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
  // set_rows stored by a rope_set_rows_kv: the set_rows' id -> the rope_set_rows_kv's root
  const valueStores = new Map<number, Tensor.Tensor>()
  // sums kept beside their norm: the sum's id -> the norm's Mul node and its weight
  const kept = new Map<number, { norm: Tensor.Tensor; weight: Tensor.Tensor; eps: number }>()
  // sums stored over their first source by their norm's node: the sum's id -> that node (the norm's Mul)
  const stored = new Map<number, Tensor.Tensor>()
  const absorbed = new Set<number>()
  // products over stacked weights taken into a mul_mat_swiglu with their swiglu, and products stored
  // permuted (mul_mat_permuted): each reads their b as they did
  const productsReadingB = new Set<number>()
  const claim = (root: Tensor.Tensor, f: Fused) => {
    if (f.absorbed.some((t) => absorbed.has(t.id) || fusions.has(t.id))) return false
    fusions.set(root.id, f)
    for (const t of f.absorbed) absorbed.add(t.id)
    return true
  }
  const order = new Map(g.nodes.map((n, i) => [n.id, i]))
  /** the nodes that read tensor t */
  const readersOf = (t: Tensor.Tensor) => g.nodes.filter((n) => n.src.includes(t))
  /**
   * whether node `a` depends on node `b` (b is among its sources, theirs, ...): the graph's order is
   * topological, so only nodes between b and a can lead to b (the walk stays there)
   */
  const dependsOn = (a: Tensor.Tensor, b: Tensor.Tensor): boolean => {
    const from = order.get(b.id)!
    if (order.get(a.id)! < from) return false
    const seen = new Set<number>()
    const stack = [...a.src]
    while (stack.length > 0) {
      const t = stack.pop()!
      if (t === b) return true
      if (seen.has(t.id) || (order.get(t.id) ?? -1) < from) continue
      seen.add(t.id)
      stack.push(...t.src)
    }
    return false
  }
  /**
   * the set_rows that stores rows at the indices of set_rows `keys` into another table (a layer's values
   * beside its keys), each row whole, nothing else fused with it; undefined if none
   */
  const valuesBeside = (keys: Tensor.Tensor): Tensor.Tensor | undefined => {
    const [table, , idx] = keys.src
    const at = order.get(keys.id)!
    // neither store may depend on the other (every layer's stores share the positions: a later layer's
    // values depend on this layer's keys through its attention, an earlier layer's keys on its values)
    const candidates = g.nodes.filter((z) =>
      z !== keys && z.op._tag === "SetRows" && z.src[2] === idx && z.src[0] !== table &&
      z.src[0].viewSrc === undefined && !outputs.has(z.id) && !absorbed.has(z.id) && !fusions.has(z.id) &&
      !valueStores.has(z.id) && z.src[0].dtype === table.dtype && z.src[1].ne[1] === idx.ne[0] &&
      z.src[1].ne[2] === 1 && z.src[1].ne[3] === 1 && rowsOk(z.src[1]) && rowsOk(z.src[0])
    )
    // the nearest in the graph's order that is independent of it (the same layer's, found first)
    return candidates
      .sort((a, b) => Math.abs(order.get(a.id)! - at) - Math.abs(order.get(b.id)! - at))
      .find((z) => !dependsOn(z, keys) && !dependsOn(keys, z))
  }
  /**
   * where `gate` and `up` are the two halves of one product's rows (views of a product over stacked weights,
   * read by nothing else): the weights' two halves as views, the activations and the product; else undefined
   */
  const stackHalves = (gate: Tensor.Tensor, up: Tensor.Tensor) => {
    const product = gate.src[0]
    if (product === undefined || up.src[0] !== product || product.op._tag !== "MulMat") return undefined
    const [w, b] = product.src
    const F = gate.ne[0]
    const halves = gate.op._tag === "View" && up.op._tag === "View" && gate.viewSrc === product &&
      up.viewSrc === product && users.get(product.id) === 2 && !outputs.has(product.id) &&
      users.get(gate.id) === 1 && users.get(up.id) === 1 && !outputs.has(gate.id) && !outputs.has(up.id) &&
      product.ne[0] === 2 * F && Tensor.sameShape(gate, up) &&
      gate.ne.slice(1).every((n, i) => n === product.ne[i + 1]) &&
      gate.nb.every((n, i) => n === product.nb[i]) && up.nb.every((n, i) => n === product.nb[i]) &&
      gate.viewOffset === 0 && up.viewOffset === F * product.nb[0] &&
      w.op._tag === "None" && w.ne[1] === 2 * F && w.ne[2] === 1 && w.ne[3] === 1 && Tensor.isContiguous(w)
    if (!halves) return undefined
    const half = (at: number) => Tensor.unsafeView(w, [w.ne[0], F, 1, 1], w.nb, at, Op.View(), [w])
    return { gate: half(0), up: half(F * w.nb[1]), b, product }
  }
  /**
   * whether sum x = r + delta may be stored over r by its norm's node: r a computed result of x's shape and
   * memory (or a sum stored so itself), no input, weight or output, and every other reader of r done before
   * delta is made (so before the node that overwrites it)
   */
  const storable = (x: Tensor.Tensor) => {
    const [r, delta] = x.src
    const computed = r.op._tag !== "None" && r.viewSrc === undefined && r.flags === 0 && !outputs.has(r.id) &&
      (stored.has(r.id) || (!absorbed.has(r.id) && !kept.has(r.id) && !valueStores.has(r.id)))
    return computed && x.dtype === "f32" && r.dtype === "f32" && Tensor.sameShape(x, r) && Tensor.isContiguous(r) &&
      Tensor.isContiguous(x) && Tensor.nrows(x) > 1 && !outputs.has(x.id) && x.viewSrc === undefined &&
      !absorbed.has(x.id) && !fusions.has(x.id) && !kept.has(x.id) && !stored.has(x.id) &&
      readersOf(r).every((u) => u === x || dependsOn(delta, u))
  }
  // visit consumers last-first so the longest chain claims its nodes
  for (let i = g.nodes.length - 1; i >= 0; i--) {
    const y = g.nodes[i]
    if (absorbed.has(y.id) || fusions.has(y.id) || kept.has(y.id) || valueStores.has(y.id) || stored.has(y.id)) {
      continue
    }
    const [s0, s1] = y.src
    if (y.op._tag === "Mul" && s0.op._tag === "RmsNorm" && inner(s0) && rowsOk(s0.src[0])) {
      const x = s0.src[0]
      const eps = s0.op.eps
      if (x.op._tag === "Add" && inner(x) && rowsOk(x.src[0])) {
        if (claim(y, { op: Op.AddRmsNorm({ eps, withMul: true }), src: [x.src[0], x.src[1], s1], absorbed: [s0, x] })) {
          continue
        }
      }
      if (
        options.addRmsNormKeep === true && x.op._tag === "Add" && x.dtype === "f32" && y.dtype === "f32" &&
        !outputs.has(x.id) && x.viewSrc === undefined &&
        Tensor.nrows(x) === 1 && Tensor.sameShape(x, x.src[0]) && rowsOk(x.src[0]) && s1.op._tag === "None" &&
        !absorbed.has(x.id) && !fusions.has(x.id) && !kept.has(x.id) &&
        options.normsInProducts?.(y, readersOf(y)) !== true
      ) {
        kept.set(x.id, { norm: y, weight: s1, eps })
        absorbed.add(s0.id)
        continue
      }
      if (options.addRmsNormStore === true && x.op._tag === "Add" && rowsOk(x.src[1]) && storable(x)) {
        if (claim(y, { op: Op.AddRmsNormStore({ eps, withMul: true }), src: [...x.src, s1], absorbed: [s0] })) {
          stored.set(x.id, y)
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
    // a gated FFN over stacked weights (a prompt's gate and up as one product, swiglu reading its rows' two
    // halves): one mul_mat_swiglu over views of the weights' two halves
    if (y.op._tag === "Glu" && y.op.kind === "swiglu" && !y.op.swapped && options.mulMatSwiglu !== undefined) {
      const halves = y.src.length === 2 ? stackHalves(s0, s1) : undefined
      if (
        halves !== undefined && options.mulMatSwiglu(halves.gate, halves.up, halves.b) &&
        claim(y, { op: Op.MulMatSwiglu(), src: [halves.gate, halves.up, halves.b], absorbed: [s0, s1, halves.product] })
      ) {
        productsReadingB.add(halves.product.id)
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
    if (y.op._tag === "SetRows" && options.ropeSetRows === true && s1.op._tag === "Reshape") {
      const r = s1.src[0]
      if (
        r.op._tag === "Rope" && users.get(s1.id) === 1 && users.get(r.id) === 1 && !outputs.has(s1.id) &&
        !outputs.has(r.id) && r.viewSrc === undefined && r.ne[3] === 1 && s1.ne[0] === r.ne[0] * r.ne[1] &&
        s1.ne[1] === r.ne[2] && s1.ne[2] === 1 && s1.ne[3] === 1
      ) {
        const { _tag, ...rope } = r.op
        const src = [s0, ...r.src, y.src[2]]
        const values = options.ropeSetRowsKv === true ? valuesBeside(y) : undefined
        if (values !== undefined) {
          if (claim(y, { op: Op.RopeSetRowsKv(rope), src: [...src, ...values.src.slice(0, 2)], absorbed: [s1, r] })) {
            valueStores.set(values.id, y)
            continue
          }
        }
        if (claim(y, { op: Op.RopeSetRows(rope), src, absorbed: [s1, r] })) continue
      }
    }
    if (y.op._tag === "FlashAttnExt" && options.ropeAttention !== undefined && s0.op._tag === "Permute") {
      const r = s0.src[0]
      const [a0, a1, a2, a3] = s0.op.axes
      if (
        a0 === 0 && a1 === 2 && a2 === 1 && a3 === 3 && r.op._tag === "Rope" && users.get(s0.id) === 1 &&
        users.get(r.id) === 1 && !outputs.has(s0.id) && !outputs.has(r.id) && r.viewSrc === undefined &&
        options.ropeAttention(y, r)
      ) {
        const { _tag, ...attention } = y.op
        const { _tag: _rope, ...rope } = r.op
        const src = [r.src[0], ...y.src.slice(1), ...r.src.slice(1)]
        if (claim(y, { op: Op.RopeFlashAttnExt({ ...attention, rope }), src, absorbed: [s0, r], swapFirst: true })) {
          continue
        }
      }
    }
    if (y.op._tag === "Add" && s0.op._tag === "MulMat" && inner(s0)) {
      if (claim(y, { op: Op.MulMatAdd(), src: [s0.src[0], s0.src[1], s1], absorbed: [s0] })) continue
    }
    // a product's contiguous copy permuted (attention's V·P into [D, heads, tokens]): the product stores it so
    if (y.op._tag === "Cont" && s0.op._tag === "Permute" && s0.op.axes[0] === 0 && options.mulMatPermuted) {
      const p = s0.src[0]
      if (
        p.op._tag === "MulMat" && inner(p) && users.get(s0.id) === 1 && !outputs.has(s0.id) &&
        y.dtype === p.dtype && options.mulMatPermuted(p, s0.op.axes) &&
        claim(y, { op: Op.MulMatPermuted({ axes: s0.op.axes }), src: [p.src[0], p.src[1]], absorbed: [s0, p] })
      ) {
        productsReadingB.add(p.id)
        continue
      }
    }
    // a sum of a product and the residual stream (x + W a, as a decoding step adds a layer's output; of many
    // rows where the backend asks)
    if (
      y.op._tag === "Add" && s1.op._tag === "MulMat" && inner(s1) &&
      (Tensor.nrows(y) === 1 || options.residualProducts === true) &&
      Tensor.sameShape(s0, s1) && s0.dtype === s1.dtype
    ) {
      if (claim(y, { op: Op.MulMatAdd(), src: [s1.src[0], s1.src[1], s0], absorbed: [s1] })) continue
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
  // products left unfused that share their activations: stacked into one node where the backend asks
  const stacks = new Map<number, ReadonlyArray<Tensor.Tensor>>()
  if (options.mulMatStack !== undefined) {
    const byB = new Map<number, Array<Tensor.Tensor>>()
    for (const n of g.nodes) {
      if (n.op._tag !== "MulMat" || absorbed.has(n.id) || fusions.has(n.id) || outputs.has(n.id)) continue
      if (n.viewSrc !== undefined || n.dtype !== "f32") continue
      byB.set(n.src[1].id, [...(byB.get(n.src[1].id) ?? []), n])
    }
    for (const group of byB.values()) {
      // one column only: a stack's result is laid out a column at a time, so with more columns each product
      // would be a strided view of it, and the views built on a product (a reshape into heads) take it to be
      // contiguous (a 3-token prompt's f16 logits were off by 1.3 on WebGPU so)
      if (group.length < 2 || Tensor.nrows(group[0]) !== 1) continue
      if (!options.mulMatStack(group.map((p) => p.src[0]), group[0].src[1])) continue
      for (const p of group) stacks.set(p.id, group)
    }
  }
  // activations written in f16 where every user is a product that takes them so (the producer as fused)
  const halves = new Set<number>()
  if (options.halfActivations !== undefined) {
    const readers = new Map<number, Array<Tensor.Tensor>>()
    for (const n of g.nodes) {
      for (const s of n.src) {
        const list = readers.get(s.id)
        if (list === undefined) readers.set(s.id, [n])
        else list.push(n)
      }
    }
    // (a product taken into a gated one, or stored permuted, still reads b as a product of the same rows would)
    const plain = (t: Tensor.Tensor) =>
      productsReadingB.has(t.id) || (!absorbed.has(t.id) && !fusions.has(t.id) && !stacks.has(t.id) && !kept.has(t.id))
    for (const n of g.nodes) {
      const op = fusions.get(n.id)?.op ?? n.op
      if (!HALF_PRODUCERS.has(op._tag) || absorbed.has(n.id) || kept.has(n.id) || outputs.has(n.id)) continue
      if (n.viewSrc !== undefined || n.dtype !== "f32") continue
      const users = readers.get(n.id) ?? []
      if (
        users.length > 0 &&
        users.every((u) =>
          u.op._tag === "MulMat" && u.src[1] === n && u.src[0] !== n && plain(u) && options.halfActivations!(u)
        )
      ) {
        halves.add(n.id)
      }
    }
  }
  // (a stored sum's norm is among the fusions)
  if (fusions.size === 0 && stacks.size === 0 && kept.size === 0 && halves.size === 0) return g

  const map = new Map<number, Tensor.Tensor>()
  // nodes are rebuilt in the graph's order, and a node's sources before it where a fusion reads some from
  // further on (a rope_set_rows_kv built at its values' set_rows, its keys' rope later in the order)
  const nodes = new Set(g.nodes.map((n) => n.id))
  const visited = new Set<number>()
  const get = (t: Tensor.Tensor): Tensor.Tensor => {
    if (nodes.has(t.id) && !visited.has(t.id)) visit(t)
    return map.get(t.id) ?? t
  }
  /** node n rebuilt over its rebuilt sources (fused where it was claimed), where anything changed */
  const rebuild = (n: Tensor.Tensor): void => {
    const f = fusions.get(n.id)
    const op = f?.op ?? n.op
    const src = (f?.src ?? n.src).map(get)
    if (f?.swapFirst === true) {
      const x = src[0]
      src[0] = Tensor.unsafeView(
        x,
        [x.ne[0], x.ne[2], x.ne[1], x.ne[3]],
        [x.nb[0], x.nb[2], x.nb[1], x.nb[3]],
        0,
        Op.Permute({ axes: [0, 2, 1, 3] }),
        [x]
      )
    }
    const dtype = halves.has(n.id) ? "f16" : n.dtype
    if (f === undefined && dtype === n.dtype && src.every((s, k) => s === n.src[k])) return
    let t: Tensor.Tensor
    if (n.viewSrc !== undefined) {
      // at the same offset from its (rebuilt) source as before: a stacked product's view sits inside its stack
      const base = src[0]
      t = Tensor.unsafeView(base, n.ne, n.nb, n.viewOffset - n.src[0].viewOffset, op, src, n.dtype)
      Tensor.setFlag(t, n.flags)
    } else {
      t = Tensor.unsafeMake(n.name, dtype, n.ne, op, src, n.flags)
    }
    ;(t as { name: string }).name = n.name
    map.set(n.id, t)
  }
  /** node n rebuilt (once) */
  function visit(n: Tensor.Tensor): void {
    if (visited.has(n.id)) return
    visited.add(n.id)
    if (absorbed.has(n.id) || map.has(n.id)) return
    // a set_rows a rope_set_rows_kv stores, or a sum its norm's node stores over the stream before it: its
    // first source after that node (a view listing it as a source, so n's readers come after the store)
    const writer = valueStores.get(n.id) ?? stored.get(n.id)
    if (writer !== undefined) {
      visit(writer)
      const into = get(n.src[0])
      const v = Tensor.unsafeView(into, n.ne, n.nb, 0, Op.View(), [into, get(writer)])
      ;(v as { name: string }).name = n.name
      Tensor.setFlag(v, n.flags)
      map.set(n.id, v)
      return
    }
    const keep = kept.get(n.id)
    if (keep !== undefined) {
      // at the sum: the fused node, the sum a view of each row's first half and the norm of its second
      const D = n.ne[0]
      const fused = Tensor.unsafeMake(
        `${n.name}+${keep.norm.name}`,
        "f32",
        [2 * D, n.ne[1], n.ne[2], n.ne[3]],
        Op.AddRmsNormKeep({ eps: keep.eps, withMul: true }),
        [get(n.src[0]), get(n.src[1]), get(keep.weight)]
      )
      for (const [t, at] of [[n, 0], [keep.norm, D * 4]] as const) {
        const v = Tensor.unsafeView(fused, t.ne, fused.nb, at, Op.View(), [fused], "f32")
        ;(v as { name: string }).name = t.name
        Tensor.setFlag(v, t.flags)
        map.set(t.id, v)
      }
      return
    }
    const stack = stacks.get(n.id)
    if (stack !== undefined) {
      // at the first product of a stack (its weights and activations are known by then): the stacked node,
      // and every product as a view of its rows
      if (map.has(n.id)) return
      const b = get(n.src[1])
      const rows = stack.reduce((m, p) => m + p.ne[0], 0)
      const fused = Tensor.unsafeMake(
        stack.map((p) => p.name).join("+"),
        "f32",
        [rows, n.ne[1], n.ne[2], n.ne[3]],
        Op.MulMatStack({ parts: stack.length }),
        [...stack.map((p) => get(p.src[0])), b]
      )
      let row = 0
      for (const p of stack) {
        const v = Tensor.unsafeView(fused, p.ne, fused.nb, row * 4, Op.View(), [fused], "f32")
        ;(v as { name: string }).name = p.name
        Tensor.setFlag(v, p.flags)
        map.set(p.id, v)
        row += p.ne[0]
      }
      return
    }
    rebuild(n)
  }
  for (const n of g.nodes) visit(n)
  const aliases = new Map<number, Tensor.Tensor>(g.aliases ?? [])
  for (const [id, t] of aliases) aliases.set(id, get(t))
  for (const [id, t] of map) aliases.set(id, t)
  return Graph.fromOutputs(g.outputs.map(get), aliases)
}
