/**
 * Compute graphs: the tensors reachable from the outputs, in a topological order (sources before
 * users), split like ggml into leafs (no op) and nodes. The order is computed iteratively, so graphs of
 * any depth are fine.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as DType from "./DType.js"
import type { ShapeError } from "./GpuError.js"
import * as Op from "./Op.js"
import type { TensorLike } from "./Tensor.js"
import * as Tensor from "./Tensor.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/Graph")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * @since 0.1.0
 * @category models
 */
export interface Graph {
  readonly [TypeId]: TypeId
  /** tensors with an op, sources first */
  readonly nodes: ReadonlyArray<Tensor.Tensor>
  /** tensors without an op: inputs, weights, constants */
  readonly leafs: ReadonlyArray<Tensor.Tensor>
  readonly outputs: ReadonlyArray<Tensor.Tensor>
  /** after a rewrite: original tensor id -> the tensor that now computes it */
  readonly aliases?: ReadonlyMap<number, Tensor.Tensor>
}

/**
 * The tensor of `g` that holds `t`'s value (itself, or its replacement after a rewrite).
 *
 * @since 0.1.0
 * @category getters
 */
export const resolve = (g: Graph, t: Tensor.Tensor): Tensor.Tensor => g.aliases?.get(t.id) ?? t

/**
 * A mutable builder: declare inputs and weights, build ops with `Ops`, mark outputs, then `build`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Builder {
  /** a graph input, set before each compute */
  readonly input: (
    name: string,
    dtype: DType.DType,
    ne: ReadonlyArray<number>
  ) => Effect.Effect<Tensor.Tensor, ShapeError>
  /** a weight: kept for the graph's whole life */
  readonly param: (
    name: string,
    dtype: DType.DType,
    ne: ReadonlyArray<number>
  ) => Effect.Effect<Tensor.Tensor, ShapeError>
  /** marks a result to read back; its memory is never reused */
  readonly output: (t: TensorLike, name?: string) => Effect.Effect<Tensor.Tensor, ShapeError>
  readonly outputs: ReadonlyArray<Tensor.Tensor>
  readonly build: () => Graph
}

/**
 * @example
 * ```ts
 * import { Cpu, Graph, Ops, Registry } from "@effect-gpu/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const g = Graph.make()
 *   const a = yield* g.input("a", "f32", [4, 2]) // ne: [columns, rows], as ggml
 *   const b = yield* g.input("b", "f32", [4, 3])
 *   const y = yield* g.output(Ops.mulMat(a, b)) // [2, 3]: a's rows dotted with b's
 *   const backend = yield* (yield* Registry.bestDevice).makeBackend()
 *   const plan = yield* backend.allocate(g)
 *   yield* plan.set(a, [1, 0, 0, 0, 0, 1, 0, 0])
 *   yield* plan.set(b, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
 *   yield* backend.compute(plan)
 *   return Array.from(yield* plan.get(y)) // [1, 2, 5, 6, 9, 10]
 * })
 *
 * Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(Cpu.layer())))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (): Builder => {
  const outputs: Array<Tensor.Tensor> = []
  return {
    input: (name, dtype, ne) => Tensor.make(name, dtype, ne, { flags: Tensor.Flags.input }),
    param: (name, dtype, ne) => Tensor.make(name, dtype, ne, { flags: Tensor.Flags.param }),
    output: (t, name) =>
      Effect.map(Tensor.resolve(t), (t) => {
        Tensor.setFlag(t, Tensor.Flags.output)
        if (name !== undefined && t.name === "") (t as { name: string }).name = name
        if (!outputs.includes(t)) outputs.push(t)
        return t
      }),
    outputs,
    build: () => fromOutputs(outputs)
  }
}

/**
 * The graph of everything the outputs depend on. Sources are visited in order (src0 first) like ggml's
 * ggml_build_forward_expand, with an explicit stack.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromOutputs = (
  outputs: ReadonlyArray<Tensor.Tensor>,
  aliases?: ReadonlyMap<number, Tensor.Tensor>
): Graph => {
  const nodes: Array<Tensor.Tensor> = []
  const leafs: Array<Tensor.Tensor> = []
  const visited = new Set<number>()
  const stack: Array<{ t: Tensor.Tensor; next: number }> = []
  for (const out of outputs) {
    if (visited.has(out.id)) continue
    visited.add(out.id)
    stack.push({ t: out, next: 0 })
    while (stack.length > 0) {
      const top = stack[stack.length - 1]
      if (top.next < top.t.src.length) {
        const s = top.t.src[top.next++]
        if (!visited.has(s.id)) {
          visited.add(s.id)
          stack.push({ t: s, next: 0 })
        }
      } else {
        stack.pop()
        if (top.t.op._tag === "None") leafs.push(top.t)
        else nodes.push(top.t)
      }
    }
  }
  return aliases === undefined
    ? { [TypeId]: TypeId, nodes, leafs, outputs: [...outputs] }
    : { [TypeId]: TypeId, nodes, leafs, outputs: [...outputs], aliases }
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isGraph = (u: unknown): u is Graph => typeof u === "object" && u !== null && TypeId in u

/**
 * A graph from a graph or a builder.
 *
 * @since 0.1.0
 * @category constructors
 */
export const from = (g: Graph | Builder): Graph => isGraph(g) ? g : g.build()

/**
 * Nodes that run a kernel (views only reinterpret memory).
 *
 * @since 0.1.0
 * @category getters
 */
export const computeNodes = (g: Graph): ReadonlyArray<Tensor.Tensor> => g.nodes.filter((t) => !Op.isView(t.op))

/**
 * How many source slots of the graph's nodes read each tensor, by id (a node that reads a tensor twice
 * counts twice): a tensor read once may be fused into its one user.
 *
 * @since 0.1.0
 * @category getters
 */
export const users = (g: Graph): ReadonlyMap<number, number> => {
  const m = new Map<number, number>()
  for (const n of g.nodes) for (const s of n.src) m.set(s.id, (m.get(s.id) ?? 0) + 1)
  return m
}

/**
 * The ids of the tensors whose values the graph must keep: its outputs and nodes flagged as outputs.
 *
 * @since 0.1.0
 * @category getters
 */
export const outputIds = (g: Graph): ReadonlySet<number> => {
  const ids = new Set(g.outputs.map((t) => t.id))
  for (const n of g.nodes) if ((n.flags & Tensor.Flags.output) !== 0) ids.add(n.id)
  return ids
}

/**
 * One line per node: what ggml's ggml_graph_print shows.
 *
 * @since 0.1.0
 * @category getters
 */
export const describe = (g: Graph): string =>
  g.nodes.map((t, i) =>
    `${i}: ${Op.name(t.op)} ${t.dtype}[${t.ne.join(", ")}] <- ${t.src.map((s) => s.name || `#${s.id}`).join(", ")}`
  ).join("\n")
