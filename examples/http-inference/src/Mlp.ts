/**
 * The model: a two-layer perceptron, probabilities = softmax(W2 gelu(W1 x + b1) + b2), with weights
 * generated from a fixed seed (the loading path is real; the numbers are made up).
 */
import { Graph, Ops } from "@effect-gpu/core"
import type { Tensor } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { Effect } from "effect"

export const INPUT = 16
export const HIDDEN = 64
export const CLASSES = 8
/** rows per compute: requests are padded to it, so one plan serves every request */
export const MAX_BATCH = 32

export interface Weights {
  readonly w1: Float32Array
  readonly b1: Float32Array
  readonly w2: Float32Array
  readonly b2: Float32Array
}

export const weights = (seed = 42): Weights => {
  const next = Generators.prng(seed)
  const fill = (n: number, scale: number) => Float32Array.from({ length: n }, () => (next() - 0.5) * scale)
  return {
    w1: fill(INPUT * HIDDEN, 2 / Math.sqrt(INPUT)),
    b1: fill(HIDDEN, 0.1),
    w2: fill(HIDDEN * CLASSES, 2 / Math.sqrt(HIDDEN)),
    b2: fill(CLASSES, 0.1)
  }
}

export interface ModelGraph {
  readonly graph: Graph.Graph
  readonly x: Tensor.Tensor
  readonly params: {
    readonly w1: Tensor.Tensor
    readonly b1: Tensor.Tensor
    readonly w2: Tensor.Tensor
    readonly b2: Tensor.Tensor
  }
  readonly probs: Tensor.Tensor
}

export const build = Effect.gen(function*() {
  const g = Graph.make()
  const x = yield* g.input("x", "f32", [INPUT, MAX_BATCH])
  const w1 = yield* g.param("w1", "f32", [INPUT, HIDDEN])
  const b1 = yield* g.param("b1", "f32", [HIDDEN])
  const w2 = yield* g.param("w2", "f32", [HIDDEN, CLASSES])
  const b2 = yield* g.param("b2", "f32", [CLASSES])
  const h = Ops.gelu(Ops.add(Ops.mulMat(w1, x), b1))
  const probs = yield* g.output(Ops.softMax(Ops.add(Ops.mulMat(w2, h), b2)), "probs")
  return { graph: g.build(), x, params: { w1, b1, w2, b2 }, probs } satisfies ModelGraph
})
