/**
 * A graph over several backends (ggml's backend_sched): each node is placed where the caller pins it,
 * else where its weights live (unless a backend earlier in the list offloads it, as a GPU takes a large
 * batch), else with its neighbours (ggml's expansion passes), else on the first backend whose device
 * supports it; consecutive nodes on one backend make a split; each split is its own graph, allocated on its backend, whose inputs from
 * other splits are copied in before it runs. Views and leafs are rebuilt in every split that uses them (a
 * view another node writes into, a fused graph's stores, is that node's split's and copied to the others).
 * Copies are the destination backend's `copyAsync` from the source split's plan, ordered by an event on
 * the source backend (ggml's cpy_tensor_async between backends), or out of a GPU to another device, whose
 * bytes come through the host, by the read in the source backend's turn; once per compute; splits go out with
 * `computeAsync`, and `compute` waits for every backend. `byLayer` places by layer (llama.cpp's
 * --tensor-split); `captureNext` traces a compute split by split.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import type * as Scope from "effect/Scope"
import type * as Backend from "./Backend.js"
import type {
  AllocationError,
  BackendError,
  DeviceLost,
  NotAnOutput,
  OutOfBounds,
  Released,
  ShapeError
} from "./GpuError.js"
import { UnsupportedOp } from "./GpuError.js"
import * as Graph from "./Graph.js"
import * as Op from "./Op.js"
import { Op as OpCase } from "./Op.js"
import type * as Plan from "./Plan.js"
import * as Tensor from "./Tensor.js"
import type * as TensorData from "./TensorData.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** pins a node to a backend (its index in the scheduler's list); undefined leaves it to placement */
  readonly placement?: (node: Tensor.Tensor) => number | undefined
  /**
   * where a weight (a leaf) lives: the backend its users go to, unless a backend before it in the list
   * offloads them (ggml's offload_op: a large batch, e.g. mul_mat with 32 columns or more on a GPU)
   */
  readonly weights?: (leaf: Tensor.Tensor) => number | undefined
}

/**
 * One split: its backend, the original nodes it computes, and its copies in.
 *
 * @since 0.1.0
 * @category models
 */
export interface Split {
  readonly backend: Backend.Backend
  readonly nodes: ReadonlyArray<Tensor.Tensor>
  readonly plan: Plan.Plan
  /** the tensors other splits compute that this one reads: copied in before it runs */
  readonly copies: ReadonlyArray<{ readonly from: number; readonly source: Tensor.Tensor; readonly bytes: number }>
}

/**
 * A graph placed and allocated over the backends: set its inputs, compute, get its outputs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScheduledPlan {
  readonly splits: ReadonlyArray<Split>
  /** writes an input or weight of the original graph (into every split that reads it) */
  readonly set: (
    t: Tensor.Tensor,
    data: TensorData.HostData
  ) => Effect.Effect<void, ShapeError | OutOfBounds | Released>
  /** reads an output of the original graph */
  readonly get: (
    t: Tensor.Tensor
  ) => Effect.Effect<TensorData.HostArray, ShapeError | NotAnOutput | OutOfBounds | BackendError>
}

/**
 * What one compute did, split by split: where it ran, what it copied in, and how long each part took
 * (host time, milliseconds: the copies include their waits, the compute its wait for the results).
 *
 * @since 0.1.0
 * @category models
 */
export interface Trace {
  readonly splits: ReadonlyArray<{
    readonly device: string
    readonly nodes: number
    readonly copies: ReadonlyArray<{ readonly from: string; readonly bytes: number }>
    readonly copyMs: number
    readonly computeMs: number
  }>
  readonly totalMs: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Scheduler {
  readonly backends: ReadonlyArray<Backend.Backend>
  /** places and allocates a graph (scoped: every split's memory is released with the scope) */
  readonly allocate: (
    graph: Graph.Graph | Graph.Builder
  ) => Effect.Effect<ScheduledPlan, AllocationError | UnsupportedOp | DeviceLost | Released, Scope.Scope>
  /** runs the splits in order, each after its copies in; returns once the outputs are ready */
  readonly compute: (
    plan: ScheduledPlan
  ) => Effect.Effect<void, BackendError | UnsupportedOp | OutOfBounds | Released>
  /** hands the splits and their copies to their backends and returns; failures surface at `synchronize` */
  readonly computeAsync: (
    plan: ScheduledPlan
  ) => Effect.Effect<void, BackendError | UnsupportedOp | OutOfBounds | Released>
  /** waits for every backend the plan's splits run on */
  readonly synchronize: (plan: ScheduledPlan) => Effect.Effect<void, BackendError>
  /** the trace of the next compute: the outer effect arms it, the inner one waits for it */
  readonly captureNext: Effect.Effect<Effect.Effect<Trace>>
}

/**
 * the node that writes into a view's memory, where one does: a view listing, besides its base, a computed
 * node (a set_rows its kv store stores, a sum its norm's node stores over the stream before it, Fusion)
 */
const writerOf = (t: Tensor.Tensor): Tensor.Tensor | undefined =>
  Op.isView(t.op) ? t.src.slice(1).find((s) => !Op.isView(s.op) && s.op._tag !== "None") : undefined

/** per split: the original tensors rebuilt in its graph, and the split that computes each boundary */
interface Building {
  readonly backend: number
  readonly nodes: Array<Tensor.Tensor>
  readonly local: Map<number, Tensor.Tensor>
  readonly copies: Array<{ from: number; source: Tensor.Tensor; local: Tensor.Tensor }>
}

/**
 * A scheduler over `backends`, in priority order (put the CPU last: it supports every op).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (backends: ReadonlyArray<Backend.Backend>, options: Options = {}): Scheduler => {
  const last = backends.length - 1
  const supports = (at: number, node: Tensor.Tensor) => backends[at].device.supportsOp(node)

  /** where a node must go: its pin (where that backend can run it), else where its weights live */
  const fixed = (node: Tensor.Tensor): number | undefined => {
    const pinned = options.placement?.(node)
    if (pinned !== undefined && pinned >= 0 && pinned < backends.length && supports(pinned, node)) return pinned
    // a node reading a weight goes where the weight lives, unless an earlier backend offloads it
    const home = options.weights === undefined ? undefined : node.src
      .map((s) => s.viewSrc ?? s)
      .filter((s) => s.op._tag === "None")
      .map((s) => options.weights!(s))
      .find((h): h is number => h !== undefined && h >= 0 && h < backends.length)
    if (home === undefined) return undefined
    const offload = backends.findIndex((b, i) => i < home && supports(i, node) && b.device.offloadOp(node))
    if (offload >= 0) return offload
    return supports(home, node) ? home : undefined
  }

  /**
   * ggml's placement passes over the nodes in order: those with a pin or weights first; then the others
   * take a neighbour's backend where it can run them, the GPUs' (every backend but the last) spreading
   * down the graph and up before the last's does, so that a node between two products stays with them
   * rather than crossing over; the rest go to the first backend that runs them
   */
  const placeAll = (nodes: ReadonlyArray<Tensor.Tensor>): Map<number, number> | UnsupportedOp => {
    const at = new Map<number, number>()
    for (const node of nodes) {
      const f = fixed(node)
      if (f !== undefined) at.set(node.id, f)
    }
    const spread = (order: ReadonlyArray<Tensor.Tensor>, gpusOnly: boolean) => {
      let cur: number | undefined
      for (const node of order) {
        const known = at.get(node.id)
        if (known !== undefined) cur = gpusOnly && known === last ? undefined : known
        else if (cur !== undefined && supports(cur, node)) at.set(node.id, cur)
      }
    }
    const reversed = [...nodes].reverse()
    if (last > 0) {
      spread(nodes, true)
      spread(reversed, true)
    }
    spread(nodes, false)
    spread(reversed, false)
    for (const node of nodes) {
      if (at.has(node.id)) continue
      const i = backends.findIndex((_, k) => supports(k, node))
      if (i < 0) {
        return new UnsupportedOp({
          op: Op.name(node.op),
          dtypes: [node.dtype, ...node.src.map((s) => s.dtype)],
          device: backends.map((b) => b.device.name).join(", ")
        })
      }
      at.set(node.id, i)
    }
    return at
  }

  const allocate = (graph: Graph.Graph | Graph.Builder) =>
    Effect.gen(function*() {
      const g = Graph.from(graph)
      const outputs = new Set(g.outputs.map((t) => t.id))
      // placement, then splits of consecutive nodes on one backend (views go with the splits that use them)
      const splitOf = new Map<number, number>()
      const splits: Array<Building> = []
      const computed = g.nodes.filter((node) => !Op.isView(node.op))
      const placed = placeAll(computed)
      if (placed instanceof UnsupportedOp) return yield* placed
      for (const node of computed) {
        const at = placed.get(node.id)!
        const previous = splits[splits.length - 1]
        if (previous === undefined || previous.backend !== at) {
          splits.push({ backend: at, nodes: [], local: new Map(), copies: [] })
        }
        splits[splits.length - 1].nodes.push(node)
        splitOf.set(node.id, splits.length - 1)
      }
      // each split's graph: its nodes over rebuilt views and leafs, and leafs standing for other splits' nodes
      const needed = new Map<number, Set<number>>() // node id -> later splits that read it
      const leafUsers = new Map<number, Array<{ split: number; local: Tensor.Tensor }>>()
      const locals: Array<(t: Tensor.Tensor) => Tensor.Tensor> = []
      splits.forEach((s, k) => {
        const local = (t: Tensor.Tensor): Tensor.Tensor => {
          const known = s.local.get(t.id)
          if (known !== undefined) return known
          let made: Tensor.Tensor
          const writer = writerOf(t)
          if (t.op._tag === "None") {
            made = Tensor.unsafeMake(t.name, t.dtype, t.ne, t.op, [], t.flags & ~Tensor.Flags.output)
            leafUsers.set(t.id, [...(leafUsers.get(t.id) ?? []), { split: k, local: made }])
          } else if (writer !== undefined && splitOf.get(writer.id) !== k) {
            // memory another split's node wrote into: its data is that split's, copied in
            const from = splitOf.get(writer.id)!
            made = Tensor.unsafeMake(t.name, t.dtype, t.ne, OpCase.None(), [], Tensor.Flags.input)
            s.copies.push({ from, source: t, local: made })
            needed.set(t.id, new Set([...(needed.get(t.id) ?? []), k]))
            locals[from](t)
          } else if (writer !== undefined) {
            // written here: over the memory its base has in this split (which may be a copy of another
            // split's), not over its owner's
            const base = t.src[0]
            made = Tensor.unsafeView(
              local(base),
              t.ne,
              t.nb,
              t.viewOffset - base.viewOffset,
              t.op,
              t.src.map(local),
              t.dtype
            )
          } else if (Op.isView(t.op)) {
            const owner = local(t.viewSrc ?? t.src[0])
            made = Tensor.unsafeView(owner, t.ne, t.nb, t.viewOffset, t.op, t.src.map(local), t.dtype)
          } else if (splitOf.get(t.id) === k) {
            // an op writing into another tensor's memory (set_rows into its table) keeps doing so here
            made = t.viewSrc === undefined
              ? Tensor.unsafeMake(t.name, t.dtype, t.ne, t.op, t.src.map(local))
              : Tensor.unsafeView(local(t.viewSrc), t.ne, t.nb, t.viewOffset, t.op, t.src.map(local), t.dtype)
          } else {
            // computed by an earlier split: an input here, copied in
            made = Tensor.unsafeMake(t.name, t.dtype, t.ne, OpCase.None(), [], Tensor.Flags.input)
            s.copies.push({ from: splitOf.get(t.id)!, source: t, local: made })
            needed.set(t.id, new Set([...(needed.get(t.id) ?? []), k]))
          }
          s.local.set(t.id, made)
          return made
        }
        locals.push(local)
        for (const node of s.nodes) local(node)
        for (const out of g.outputs) {
          if (splitOf.get(out.id) === k || (Op.isView(out.op) && s.local.has(out.id))) local(out)
        }
      })
      const plans: Array<Split> = []
      for (const s of splits) {
        // outputs of a split: the graph's outputs it computes and what later splits read
        const outs = [...s.local.entries()]
          .filter(([id, t]) => t.op._tag !== "None" && (outputs.has(id) || needed.has(id)))
          .map(([, t]) => t)
        for (const t of outs) Tensor.setFlag(t, Tensor.Flags.output)
        const backend = backends[s.backend]
        const plan = yield* backend.allocate(Graph.fromOutputs(outs))
        plans.push({
          backend,
          nodes: s.nodes,
          plan,
          copies: s.copies.map((c) => ({ from: c.from, source: c.source, bytes: Tensor.nbytes(c.source) }))
        })
      }
      const localIn = (k: number, t: Tensor.Tensor) => splits[k].local.get(t.id)!
      const scheduled: ScheduledPlan = {
        splits: plans,
        set: (t, data) =>
          Effect.forEach(leafUsers.get(t.id) ?? [], ({ local, split }) => plans[split].plan.set(local, data), {
            discard: true
          }),
        get: (original) => {
          // a tensor a fused graph computes another way answers through its alias, as a plan's get does
          const t = Graph.resolve(g, original)
          const writer = writerOf(t)
          const k = writer !== undefined
            ? splitOf.get(writer.id) ?? -1
            : splits.findIndex((s, i) => splitOf.get(t.id) === i || (Op.isView(t.op) && s.local.has(t.id)))
          // a tensor no split computes: the first split's plan answers NotAnOutput (or reads a leaf)
          return k < 0 ? plans[0].plan.get(t) : plans[k].plan.get(localIn(k, t))
        }
      }
      copiesOf.set(
        scheduled,
        splits.map((s) => s.copies.map((c) => ({ ...c, sourceLocal: () => localIn(c.from, c.source) })))
      )
      return scheduled
    }).pipe(Effect.withSpan("Scheduler.allocate", { attributes: { backends: backends.map((b) => b.name).join(", ") } }))

  // the split-local tensors of each plan's copies, kept off the public ScheduledPlan
  const copiesOf = new WeakMap<
    ScheduledPlan,
    ReadonlyArray<ReadonlyArray<{ from: number; local: Tensor.Tensor; sourceLocal: () => Tensor.Tensor }>>
  >()

  let capture: Deferred.Deferred<Trace> | undefined

  /** each split's copies in and its compute, handed to their backends in order without waiting */
  const enqueue = (plan: ScheduledPlan, waitEach: boolean) =>
    Effect.gen(function*() {
      const copies = copiesOf.get(plan) ?? []
      const armed = capture
      capture = undefined
      const started = performance.now()
      const traced: Array<Trace["splits"][number]> = []
      for (const [k, split] of plan.splits.entries()) {
        const t0 = performance.now()
        for (const c of copies[k] ?? []) {
          const source = plan.splits[c.from]
          const from = source.plan.location(c.sourceLocal())
          const to = split.plan.location(c.local)
          if (from === undefined || to === undefined) {
            return yield* new UnsupportedOp({
              op: "copy between splits",
              dtypes: [c.local.dtype],
              device: split.backend.name
            })
          }
          yield* split.backend.copyAsync(from, to, source.backend)
        }
        const t1 = performance.now()
        // traced: each split waits for its work, so that its time is its own
        if (waitEach) yield* split.backend.compute(split.plan)
        else yield* split.backend.computeAsync(split.plan)
        traced.push({
          device: split.backend.device.name,
          nodes: split.nodes.length,
          copies: split.copies.map((c) => ({ from: plan.splits[c.from].backend.device.name, bytes: c.bytes })),
          copyMs: t1 - t0,
          computeMs: performance.now() - t1
        })
      }
      return { armed, traced, started }
    })

  const used = (plan: ScheduledPlan) => [...new Set(plan.splits.map((s) => s.backend))]

  // the per-token path: the cheap span (not made the parent of the splits' own), as Backend.compute's
  const compute = (plan: ScheduledPlan) =>
    Effect.useSpan(
      "Scheduler.compute",
      { captureStackTrace: false, attributes: { splits: plan.splits.length } },
      () =>
        Effect.gen(function*() {
          const { armed, started, traced } = yield* enqueue(plan, capture !== undefined)
          for (const backend of used(plan)) yield* backend.synchronize
          if (armed !== undefined) {
            yield* Deferred.succeed(armed, { splits: traced, totalMs: performance.now() - started })
          }
        })
    )

  const computeAsync = (plan: ScheduledPlan) =>
    Effect.asVoid(enqueue(plan, false)).pipe(
      Effect.withSpan("Scheduler.computeAsync", { attributes: { splits: plan.splits.length } })
    )

  const synchronize = (plan: ScheduledPlan) => Effect.forEach(used(plan), (b) => b.synchronize, { discard: true })

  const captureNext = Effect.sync(() => {
    const deferred = Deferred.unsafeMake<Trace>(FiberId.none)
    capture = deferred
    return Deferred.await(deferred)
  })

  return { backends, allocate, compute, computeAsync, synchronize, captureNext }
}

/**
 * Placement by layer, as llama.cpp's `--tensor-split`: `layers` layers shared out over the backends in
 * proportion to `ratios` (layer l goes to the first backend whose cumulative share passes l / layers);
 * `layerOf` says a node's layer, undefined leaving the node to placement. Activations cross at the
 * boundaries.
 *
 * @since 0.1.0
 * @category placement
 */
export const byLayer = (options: {
  readonly ratios: ReadonlyArray<number>
  readonly layers: number
  readonly layerOf: (node: Tensor.Tensor) => number | undefined
}): (node: Tensor.Tensor) => number | undefined => {
  const total = options.ratios.reduce((a, b) => a + b, 0)
  const cumulative = options.ratios.map((_, i) => options.ratios.slice(0, i + 1).reduce((a, b) => a + b, 0) / total)
  return (node) => {
    const layer = options.layerOf(node)
    if (layer === undefined || total <= 0) return undefined
    const at = cumulative.findIndex((c) => layer / options.layers < c)
    return at < 0 ? options.ratios.length - 1 : at
  }
}
