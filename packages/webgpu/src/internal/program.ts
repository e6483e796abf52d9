/**
 * A plan compiled for the GPU: for every node its pipeline, bind group, parameters and grid, built once
 * per plan (shapes and placement are fixed) so a compute only encodes and submits. Operands that
 * overlap in memory (in-place results, views) share one binding: WebGPU forbids a writable binding that
 * aliases another, and one binding makes them the same memory in the shader too.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import { KernelError, UnsupportedOp } from "@effect-gpu/core/GpuError"
import * as Graph from "@effect-gpu/core/Graph"
import * as Op from "@effect-gpu/core/Op"
import type { Plan } from "@effect-gpu/core/Plan"
import * as Tensor from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type { Context } from "./context.js"
import * as GpuContext from "./context.js"
import * as Elementwise from "./kernels/elementwise.js"
import { mulMatStack, mulMatSwiglu } from "./kernels/fusedProducts.js"
import type { Kernel } from "./kernels/kernel.js"
import type { Variant } from "./kernels/kernel.js"
import { keyOf } from "./kernels/kernel.js"
import { mulMat } from "./kernels/matmul.js"
import * as MergeIn from "./kernels/mergeIn.js"
import * as NormIn from "./kernels/normIn.js"
import type { MadeB } from "./kernels/product.js"
import { ropeSetRows } from "./kernels/rope.js"
import * as Select from "./kernels/select.js"
import * as StackStores from "./kernels/stackStores.js"
import * as SplitsIn from "./splitsIn.js"
import { header, operandFields } from "./wgsl.js"

/** @internal */
export interface Dispatch {
  readonly node: Tensor.Tensor
  readonly key: string
  readonly variant: Variant
  /** per binding: "r" read-only, "w" read-write */
  readonly access: string
  /** an estimate of the work: flops of a product, else bytes moved (command buffers are cut by it) */
  readonly cost: number
  readonly pipeline: GPUComputePipeline
  readonly bindGroup: GPUBindGroup
  readonly workgroups: readonly [number, number, number]
}

/** @internal */
export interface Program {
  readonly dispatches: ReadonlyArray<Dispatch>
  readonly release: () => void
}

const SLOT = 256

/** @internal: the GPU buffer behind a core buffer of this device */
export type Resolve = (t: Tensor.Tensor) => { readonly buffer: GPUBuffer; readonly offset: number } | undefined

interface Bound {
  readonly slot: number
  readonly buffer: GPUBuffer
  readonly start: number
  readonly end: number
  readonly dtype: DType.DType
}

/** what offsets and strides of an operand count: its elements, or bytes for quantized blocks */
const unit = (dtype: DType.DType) => (DType.isQuantized(dtype) ? 1 : DType.typeSize(dtype))

/** groups operands that overlap in the same buffer; returns each operand's slot and element offset */
const bindOperands = (ctx: Context, kernel: Kernel, resolve: Resolve) => {
  const align = ctx.limits.minStorageBufferOffsetAlignment
  const ranges = kernel.operands.map((o) => {
    const home = resolve(o.within?.tensor ?? o.tensor)
    if (home === undefined) throw new Error(`operand ${o.name} of ${Op.name(o.tensor.op)} has no GPU memory`)
    const start = home.offset + (o.within?.at ?? 0)
    return { o, buffer: home.buffer, start, end: start + (o.extent ?? Tensor.nbytes(o.tensor)) }
  })
  // an operand that reaches past its tensor (scratch after a result) must stay inside its buffer
  const extentOk = ranges.every((r) => r.end <= r.buffer.size)
  const slotOf = ranges.map((_, i) => i)
  const find = (i: number): number => (slotOf[i] === i ? i : (slotOf[i] = find(slotOf[i])))
  for (let i = 0; i < ranges.length; i++) {
    for (let j = i + 1; j < ranges.length; j++) {
      const [p, q] = [ranges[i], ranges[j]]
      if (p.buffer === q.buffer && p.start < q.end && q.start < p.end) slotOf[find(i)] = find(j)
    }
  }
  // operands of one type whose bindings would overlap once their starts are aligned down (two views of one
  // result, e.g. a stack's parts) share a binding too: bindings are writable in the result's buffer, and
  // WebGPU rejects overlapping writable bindings
  const members = (root: number) => ranges.filter((_, k) => find(k) === root)
  const lo = (root: number) => Math.floor(Math.min(...members(root).map((m) => m.start)) / align) * align
  const hi = (root: number) => Math.max(...members(root).map((m) => m.end))
  for (let merged = true; merged;) {
    merged = false
    const groups = [...new Set(ranges.map((_, i) => find(i)))]
    for (const [x, i] of groups.entries()) {
      for (const j of groups.slice(x + 1)) {
        const [p, q] = [ranges[i], ranges[j]]
        if (
          p.buffer === q.buffer && p.o.tensor.dtype === q.o.tensor.dtype && find(i) !== find(j) &&
          lo(find(i)) < hi(find(j)) && lo(find(j)) < hi(find(i))
        ) {
          slotOf[find(i)] = find(j)
          merged = true
        }
      }
    }
  }
  const roots = [...new Set(ranges.map((_, i) => find(i)))]
  const bound: Array<Bound> = roots.map((root, slot) => {
    const members = ranges.filter((_, i) => find(i) === root)
    const dtypes = new Set(members.map((m) => m.o.tensor.dtype))
    if (dtypes.size > 1) throw new Error(`overlapping operands of different types: ${[...dtypes].join(", ")}`)
    const size = members[0].buffer.size
    const start = Math.floor(Math.min(...members.map((m) => m.start)) / align) * align
    // a binding is never empty (WebGPU rejects size 0): an operand without elements (K = 0) gets 16 bytes
    // its kernel never reads
    const end = Math.min(Math.max(Math.ceil(Math.max(...members.map((m) => m.end)) / 16) * 16, start + 16), size)
    return { slot, buffer: members[0].buffer, start, end, dtype: members[0].o.tensor.dtype }
  })
  const operands = ranges.map((r, i) => {
    const b = bound[roots.indexOf(find(i))]
    const ts = unit(r.o.tensor.dtype)
    if ((r.start - b.start) % ts !== 0 || r.o.tensor.nb.some((n) => n % ts !== 0)) {
      throw new Error(`operand ${r.o.name} is not aligned to its element size`)
    }
    return {
      decl: {
        name: r.o.name,
        dtype: r.o.tensor.dtype,
        slot: b.slot,
        vec4: (kernel.vec4 ?? false) && !(kernel.scalar ?? []).includes(r.o.name),
        wide: kernel.wide ?? false
      },
      fields: [(r.start - b.start) / ts, ...r.o.tensor.ne, ...r.o.tensor.nb.map((n) => n / ts)]
    }
  })
  // vec4 bindings need every element offset (and binding size) to be a multiple of 4 elements, wide f16
  // ones of 8, quantized ones (bytes) of 16
  const group = (dtype: DType.DType) => DType.isQuantized(dtype) ? 16 : kernel.wide === true && dtype === "f16" ? 8 : 4
  const vecOk = operands.every((o) => o.fields[0] % group(o.decl.dtype) === 0) &&
    bound.every((b) => (b.end - b.start) % (group(b.dtype) * unit(b.dtype)) === 0)
  return { bound, operands, vecOk, extentOk }
}

/** a tensor's bytes in its GPU buffer, or undefined where it has none */
const memoryOf = (resolve: Resolve) => (t: Tensor.Tensor) => {
  const loc = resolve(t)
  return loc === undefined ? undefined : { buffer: loc.buffer, start: loc.offset, end: loc.offset + Tensor.nbytes(t) }
}

/**
 * Splits the nodes into dispatch units: runs of element-wise nodes where each reads the previous one's
 * result (its only user, not an output) become one unit. A run is cut where its result's memory would
 * overlap an input at another offset (the fused kernel reads inputs while it writes the result).
 */
const chains = (plan: Plan, nodes: ReadonlyArray<Tensor.Tensor>, resolve: Resolve): Array<Array<Tensor.Tensor>> => {
  const users = Graph.users(plan.graph)
  const outputs = Graph.outputIds(plan.graph)
  const range = memoryOf(resolve)
  const safe = (chain: ReadonlyArray<Tensor.Tensor>) => {
    const out = range(chain[chain.length - 1])
    if (out === undefined) return false
    const inputs = new Set([chain[0].src[0], ...chain.flatMap((n) => n.src.slice(1))])
    if (inputs.size > Elementwise.CHAIN_INPUTS) return false
    for (const t of inputs) {
      const r = range(t)
      if (r === undefined) return false
      if (r.buffer === out.buffer && r.start < out.end && out.start < r.end && r.start !== out.start) return false
    }
    return true
  }
  const units: Array<Array<Tensor.Tensor>> = []
  let run: Array<Tensor.Tensor> = []
  const flush = () => {
    if (run.length > 0) units.push(run)
    run = []
  }
  for (const node of nodes) {
    const prev = run[run.length - 1]
    const extends_ = prev !== undefined && Elementwise.chainable(node) && node.src[0] === prev &&
      users.get(prev.id) === 1 &&
      !outputs.has(prev.id) && node.dtype === prev.dtype &&
      safe([...run, node])
    if (extends_) {
      run.push(node)
      continue
    }
    flush()
    if (Elementwise.chainable(node)) run = [node]
    else units.push([node])
  }
  flush()
  return units
}

/**
 * the unit, within a few after unit `i` (a stack), that is a rope_set_rows_kv storing rows of it, where the
 * units between neither read nor write the memory the store writes (its tables) nor write what it reads:
 * moved up into the stack's dispatch, its stores then change nothing those units see
 */
const storeAfter = (units: ReadonlyArray<ReadonlyArray<Tensor.Tensor>>, i: number, resolve: Resolve) => {
  const range = memoryOf(resolve)
  const overlap = (a: Tensor.Tensor, b: Tensor.Tensor) => {
    const [p, q] = [range(a), range(b)]
    return p === undefined || q === undefined || (p.buffer === q.buffer && p.start < q.end && q.start < p.end)
  }
  for (let at = i + 1; at < Math.min(units.length, i + 8); at++) {
    const store = units[at][0]
    if (units[at].length !== 1 || store.op._tag !== "RopeSetRowsKv") continue
    const tables = [store, store.src[store.op.hasFreqFactors ? 5 : 4]]
    const between = units.slice(i + 1, at).flat()
    const clear = between.every((n) =>
      !tables.some((t) => overlap(n, t) || n.src.some((s) => overlap(s, t))) &&
      !store.src.some((s) => overlap(n, s))
    )
    return clear ? at : undefined
  }
  return undefined
}

/** whether two ropes rotate alike (their parameters equal, whatever their ops) */
const sameRope = (a: Op.Op, b: Op.Op) => {
  const fields = (op: Op.Op) => JSON.stringify(Object.entries(op).filter(([k]) => k !== "_tag").sort())
  return fields(a) === fields(b)
}

/** whether a kernel makes its b as `made` has it (not a fallback that reads b) */
const takes = (kernel: Kernel, made: MadeB) => Object.entries(made.variant).every(([k, v]) => kernel.variant[k] === v)

/** the work of a node: 2 M N K flops for a product, else the bytes it reads and writes */
const costOf = (node: Tensor.Tensor): number => {
  const bytes = Tensor.nbytes(node) + node.src.reduce((sum, s) => sum + Tensor.nbytes(s), 0)
  if (
    node.op._tag === "MulMat" || node.op._tag === "MulMatAdd" || node.op._tag === "MulMatSwiglu" ||
    node.op._tag === "MulMatStack"
  ) {
    return Math.max(bytes, (node.op._tag === "MulMatSwiglu" ? 4 : 2) * Tensor.nelements(node) * node.src[0].ne[0])
  }
  return bytes
}

/** @internal */
export const build = (
  ctx: Context,
  plan: Plan,
  resolve: Resolve
): Effect.Effect<Program, KernelError | UnsupportedOp> =>
  Effect.gen(function*() {
    const nodes = plan.graph.nodes.filter((n) => !Op.isView(n.op) && Tensor.nelements(n) > 0)
    const units = chains(plan, nodes, resolve)
    /** the pipeline source, key, parameters and bindings of one kernel of a node */
    const prepare = (node: Tensor.Tensor, first: Kernel) => {
      let kernel = first
      let { bound, extentOk, operands, vecOk } = bindOperands(ctx, kernel, resolve)
      // a wide kernel falls back to its vec4 form, that to its scalar one; one whose scratch does not fit
      // its result's buffer to one without
      while (((kernel.vec4 === true && !vecOk) || !extentOk) && kernel.fallback !== undefined) {
        kernel = kernel.fallback
        ;({ bound, extentOk, operands, vecOk } = bindOperands(ctx, kernel, resolve))
      }
      if (!extentOk) throw new Error("an operand reaches past the end of its buffer")
      const fields = [...operands.flatMap((o) => operandFields(o.decl.name)), ...kernel.params.map((p) => p.field)]
      // kernels write their result "d" and the operands they mark as written; a binding is read-only when
      // its GPUBuffer is not one written (WebGPU forbids one buffer bound both writable and read-only in a
      // dispatch), as with weights bound from their own buffer
      const writtenSlots = new Set(
        operands.filter((o, i) => o.decl.name === "d" || kernel.operands[i].writes === true).map((o) => o.decl.slot)
      )
      const writtenBuffers = new Set(bound.filter((b) => writtenSlots.has(b.slot)).map((b) => b.buffer))
      const access = bound.map((b) => writtenSlots.has(b.slot) || writtenBuffers.has(b.buffer) ? "w" : "r")
        .join("")
      const decls = operands.map((o) => ({ ...o.decl, writable: access[o.decl.slot] === "w" }))
      const source = header(decls, kernel.params.map((p) => p.field), kernel.enables, kernel.diagnosticsOff) +
        kernel.main
      // the variant's key, then how the operands are bound: types by slot, and each slot's access
      const bindingKey = keyOf({
        family: "bind",
        slots: operands.map((o) => `${o.decl.slot}${o.decl.dtype}`).join(",")
      })
      const key = `${kernel.key}|${bindingKey}|${access}`
      const values = [...operands.flatMap((o) => o.fields), ...kernel.params.map((p) => p.value)]
      const types = fields.map((f) => f.type)
      return { node, kernel, bound, source, key, values, types, access }
    }
    // products that also make what a dispatch next to them would: a q/k/v stack its keys' and values' stores
    // (the rope_set_rows_kv after it, stackStores.ts), a stack or gated FFN its activations, the norm just
    // before it (rms_norm_mul, normIn.ts), a plain product its activations, the merge of the split attention
    // just before it (mergeIn.ts); those dispatches go
    const fusedAt = new Map<number, ReturnType<typeof prepare>>()
    const gone = new Set<number>()
    const users = Graph.users(plan.graph)
    const outputs = Graph.outputIds(plan.graph)
    const range = memoryOf(resolve)
    const apart = (a: Tensor.Tensor, b: Tensor.Tensor) => {
      const [p, q] = [range(a), range(b)]
      return p !== undefined && q !== undefined && (p.buffer !== q.buffer || p.end <= q.start || q.end <= p.start)
    }
    const maxBindings = ctx.limits.maxStorageBuffersPerShaderStage
    /**
     * the product of unit i merging the split attention just before it (its one reader, through a view of the
     * whole result): the attention's dispatch without its merge, the product's weighing the splits
     */
    const mergeInto = (i: number) => {
      const node = units[i][0]
      const before = units[i - 1]?.length === 1 ? units[i - 1][0] : undefined
      const b = node.src[1]
      if (
        before === undefined || b.viewSrc !== before || b.viewOffset !== 0 || !Tensor.isContiguous(b) ||
        Tensor.nelements(b) !== Tensor.nelements(before) || users.get(before.id) !== 1 || users.get(b.id) !== 1 ||
        outputs.has(before.id) || outputs.has(b.id)
      ) return
      const merge = MergeIn.mergeBefore(before, ctx.target)
      const kernel = merge === undefined ? undefined : Select.kernelFor(before, ctx.target)
      if (merge === undefined || kernel === undefined) return
      try {
        const attention = prepare(before, kernel)
        if (attention.kernel.variant.split !== true || attention.kernel.next === undefined) return
        const p = prepare(node, mulMat(node, ctx.target, node.op._tag === "MulMatAdd" ? node.src[2] : undefined, merge))
        if (!takes(p.kernel, merge)) return
        // the attention without its merge (the product merges)
        const { next: _merge, ...alone } = attention.kernel
        fusedAt.set(i - 1, { ...attention, kernel: alone })
        fusedAt.set(i, p)
      } catch {
        // the attention, its merge and the product each as they run alone
      }
    }
    /**
     * a query's rope (unit i) made by the keys' and values' store a few units after it (its rope of the same
     * op and positions: a layer's k rope, after q's and k's biases where it has them), on threads of its own:
     * the rope's dispatch goes. The rope then runs where the store does, so the units up to it may neither
     * read nor write its result nor write its input, nor may the store
     */
    const queryIntoStore = (i: number) => {
      const rope = units[i][0]
      let at = -1
      for (let k = i + 1; k <= Math.min(i + 4, units.length - 1) && at < 0; k++) {
        if (units[k].length === 1 && units[k][0].op._tag === "RopeSetRowsKv") at = k
      }
      const store = at < 0 ? undefined : units[at][0]
      if (
        ctx.target.queryRopesInStores === false || store === undefined || store.op._tag !== "RopeSetRowsKv" ||
        rope.op._tag !== "Rope" || gone.has(at) || fusedAt.has(at) || !sameRope(rope.op, store.op) ||
        rope.src[1] !== store.src[2] || (rope.op.hasFreqFactors && rope.src[2] !== store.src[3])
      ) return
      const written = [store, ...store.src.filter((_, k) => k === 0 || k === store.src.length - 2)]
      const between = units.slice(i + 1, at).flat()
      const clear = [...between, ...written].every((n) => apart(n, rope) && apart(n, rope.src[0])) &&
        [...between, store].every((n) => n.src.every((s) => apart(s, rope)))
      if (!clear) return
      try {
        const p = prepare(store, ropeSetRows(store, store.op, ctx.target, true, rope))
        if (p.kernel.variant.queries !== true || p.bound.length > maxBindings) return
        fusedAt.set(at, p)
        gone.add(i)
      } catch {
        // the rope and the store as they run alone
      }
    }
    units.forEach((unit, i) => {
      const node = unit[0]
      if (unit.length === 1 && node.op._tag === "Rope") {
        queryIntoStore(i)
        return
      }
      if (unit.length === 1 && (node.op._tag === "MulMat" || node.op._tag === "MulMatAdd")) {
        mergeInto(i)
        return
      }
      if (unit.length !== 1 || (node.op._tag !== "MulMatStack" && node.op._tag !== "MulMatSwiglu")) return
      const bindings = node.src.length + 1
      const storeAt = node.op._tag === "MulMatStack" ? storeAfter(units, i, resolve) : undefined
      const stores = storeAt === undefined
        ? undefined
        : StackStores.keysAndValues(node, units[storeAt][0], ctx.target, resolve, bindings, maxBindings)
      // the norm's row is read while the product writes its result: they may not overlap; the norm itself is
      // not written, so nothing else may read it
      const before = units[i - 1]?.length === 1 ? units[i - 1][0] : undefined
      const b = node.src[node.src.length - 1]
      const norm = before === b && users.get(b.id) === 1 && !outputs.has(b.id) && b.src.every((s) => apart(s, node))
        ? NormIn.normBefore(b, ctx.target, bindings + (stores?.operands.length ?? 0), maxBindings)
        : undefined
      // both where they fit, else each alone
      const tries: Array<readonly [StackStores.RowStores | undefined, MadeB | undefined]> = [
        [stores, norm],
        [stores, undefined],
        [undefined, norm]
      ]
      for (const [s, n] of tries.filter(([s, n]) => s !== undefined || n !== undefined)) {
        try {
          const p = prepare(
            node,
            node.op._tag === "MulMatStack"
              ? mulMatStack(node, node.op.parts, ctx.target, s, n)
              : mulMatSwiglu(node, ctx.target, n)
          )
          // where the form fell back (its bindings' offsets), the dispatches stay apart
          if (
            (s !== undefined && p.kernel.variant.stores !== "kv") || (n !== undefined && !takes(p.kernel, n))
          ) {
            continue
          }
          fusedAt.set(i, p)
          if (s !== undefined) gone.add(storeAt!)
          if (n !== undefined) gone.add(i - 1)
          return
        } catch {
          // the product and its neighbours each as they run alone
        }
      }
    })
    // a kernel and the dispatches that follow it for the same node (a reduction of partial results): each
    // next as the kernel before it ran (a fallback brings its own: a split product's merge or none)
    const withNexts = (first: ReturnType<typeof prepare>) => {
      const all = [first]
      for (let next = first.kernel.next; next !== undefined;) {
        const p = prepare(first.node, next)
        all.push(p)
        next = p.kernel.next
      }
      return all
    }
    const prepared = units.flatMap((unit, i): Array<ReturnType<typeof prepare> | KernelError | UnsupportedOp> => {
      const node = unit[unit.length - 1]
      const fused = fusedAt.get(i)
      if (gone.has(i) && fused === undefined) return []
      const kernel = fused !== undefined
        ? fused.kernel
        : unit.length > 1
        ? Elementwise.chain(unit, ctx.target)
        : Select.kernelFor(node, ctx.target)
      if (kernel === undefined) {
        return [new UnsupportedOp({ op: Op.name(node.op), dtypes: [node.dtype], device: ctx.name })]
      }
      try {
        return withNexts(fused ?? prepare(node, kernel))
      } catch (e) {
        return [
          new KernelError({
            op: Op.name(node.op),
            device: ctx.name,
            detail: String(e instanceof Error ? e.message : e)
          })
        ]
      }
    })
    for (const p of prepared) if (p instanceof KernelError || p instanceof UnsupportedOp) return yield* p
    // split-K merges that only add partial sums, left to the norms reading them next
    const ok = SplitsIn.foldIntoNorms(
      prepared as Array<Exclude<(typeof prepared)[number], KernelError | UnsupportedOp>>,
      ctx.target,
      (t) => users.get(t.id) ?? 0,
      (t) => outputs.has(t.id),
      prepare
    )
    // every pipeline of the graph compiles at once, ahead of the first dispatch
    const pipelines = yield* Effect.forEach(
      ok,
      (p) => GpuContext.pipeline(ctx, p.key, Op.name(p.node.op), p.access, p.source),
      { concurrency: "unbounded" }
    )

    // each dispatch's parameters in slots of their own, a slot (256 bytes, the uniform offset alignment)
    // or more where they need it (a rotated q's attention: its operands' fields and rope's)
    const slots = ok.map((p) => Math.max(1, Math.ceil((4 * p.types.length) / SLOT)))
    const starts: Array<number> = []
    let total = 0
    for (const n of slots) {
      starts.push(total)
      total += n
    }
    total = Math.max(1, total)
    const params = GpuContext.createBuffer(ctx, {
      size: total * SLOT,
      usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
      label: "params"
    })
    const words = new ArrayBuffer(total * SLOT)
    const u = new Uint32Array(words)
    const f = new Float32Array(words)
    const i = new Int32Array(words)
    const dispatches = ok.map((p, k) => {
      const base = (starts[k] * SLOT) / 4
      p.values.forEach((v, j) => {
        if (p.types[j] === "f32") f[base + j] = v
        else if (p.types[j] === "i32") i[base + j] = v
        else u[base + j] = v
      })
      const entries: Array<GPUBindGroupEntry> = p.bound.map((b) => ({
        binding: b.slot,
        resource: { buffer: b.buffer, offset: b.start, size: b.end - b.start }
      }))
      entries.push({
        binding: p.bound.length,
        resource: { buffer: params, offset: starts[k] * SLOT, size: slots[k] * SLOT }
      })
      const bindGroup = ctx.device.createBindGroup({ layout: GpuContext.layout(ctx, p.access).group, entries })
      return {
        node: p.node,
        key: p.key,
        variant: p.kernel.variant,
        access: p.access,
        cost: costOf(p.node),
        pipeline: pipelines[k],
        bindGroup,
        workgroups: p.kernel.workgroups
      }
    })
    ctx.device.queue.writeBuffer(params, 0, words)
    let released = false
    return {
      dispatches,
      release: () => {
        if (!released) {
          released = true
          GpuContext.destroyBuffer(ctx, params)
        }
      }
    }
  })

/**
 * @internal: the bytes a tensor takes in this device's buffers: its own, and the scratch its kernel keeps
 * after it (flash attention's split partials)
 */
export const allocSize = (ctx: Context, t: Tensor.Tensor): number =>
  Tensor.nbytes(t) + Select.scratchBytes(t, ctx.target)

/** @internal: whether this backend has a kernel for a node with these types and sizes */
export const supports = (ctx: Context, node: Tensor.Tensor): boolean =>
  Select.supports(node, ctx.target, ctx.limits.maxStorageBufferBindingSize)
