/**
 * The scheduler's cost on one GPU: a chain of transformer-like layers (h += W2 gelu(W1 rms_norm(h)), f32)
 * on one device, then split by layers over two virtual devices of the same adapter (2 splits), then with
 * layers alternating between them (one split per layer). Median wall time of 20 computes after warm-up;
 * the per-split overhead is the extra time over one device, per extra split.
 *
 *   tsx split-probe.ts [HIDDEN FFN TOKENS LAYERS]        (default 2048 5632 128 8)
 *   SPLIT_TRACE=1 tsx split-probe.ts ...                 also each split's copy and compute time (stderr)
 *   SPLIT_SHARE=1 tsx split-probe.ts ...                 the two devices share one GPUDevice (WebGpu's
 *                                                        shareDevice: copies on the GPU, no events)
 */
import { Graph, Ops, Registry, Scheduler } from "@effect-gpu/core"
import type { Tensor } from "@effect-gpu/core"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { warmUp } from "../case.js"

const [H, F, T, L] = (process.argv.slice(2).length === 4 ? process.argv.slice(2) : ["2048", "5632", "128", "8"]).map(
  Number
)

const chain = Effect.gen(function*() {
  const g = Graph.make()
  const x = yield* g.input("x", "f32", [H, T])
  const layerOfId = new Map<number, number>()
  const weights: Array<Tensor.Tensor> = []
  let h: Tensor.Tensor = x
  for (let l = 0; l < L; l++) {
    const w1 = yield* g.param(`w1.${l}`, "f32", [H, F])
    const w2 = yield* g.param(`w2.${l}`, "f32", [F, H])
    weights.push(w1, w2)
    const first = (yield* Ops.scale(x, 1)).id // ids are creation order: this layer's nodes come after it
    h = yield* Ops.add(h, Ops.mulMat(w2, Ops.gelu(Ops.mulMat(w1, Ops.rmsNorm(h, 1e-5)))))
    for (let id = first + 1; id <= h.id; id++) layerOfId.set(id, l)
  }
  const y = yield* g.output(h, "y")
  return { g, x, y, weights, layerOf: (t: Tensor.Tensor) => layerOfId.get(t.id) }
})

/** a pattern of 1 Mi values, tiled: weights of a realistic spread without generating billions */
const pattern = Float32Array.from({ length: 1 << 20 }, (_, i) => Math.sin(i * 12.9898) * 0.02)
const tiled = (n: number) => {
  const out = new Float32Array(n)
  for (let at = 0; at < n; at += pattern.length) out.set(pattern.subarray(0, Math.min(pattern.length, n - at)), at)
  return out
}

const shareDevice = process.env.SPLIT_SHARE === "1"

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const time = (run: Effect.Effect<void, unknown>) =>
  Effect.gen(function*() {
    yield* warmUp(run)
    const walls: Array<number> = []
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now()
      yield* run
      walls.push(performance.now() - t0)
    }
    return median(walls)
  })

const program = Effect.gen(function*() {
  const [d0, d1] = yield* Effect.all([Registry.deviceByName("WebGPU0"), Registry.deviceByName("WebGPU1")])
  const { g, layerOf, weights, x } = yield* chain
  const fill = <E>(set: (t: Tensor.Tensor, v: Float32Array) => Effect.Effect<void, E>) =>
    Effect.gen(function*() {
      yield* set(x, tiled(H * T))
      for (const w of weights) yield* set(w, tiled(w.ne[0] * w.ne[1]))
    })
  const one = yield* d0.makeBackend()
  const plan = yield* one.allocate(g)
  yield* fill(plan.set)
  const single = yield* time(one.compute(plan))
  const results: Array<Record<string, unknown>> = [{ case: "one device", splits: 1, wall_ms: single }]
  const backends = [yield* d0.makeBackend(), yield* d1.makeBackend()]
  for (
    const [name, placement] of [
      ["by layers 1:1 over two devices", Scheduler.byLayer({ ratios: [1, 1], layers: L, layerOf })],
      ["layers alternating over two devices", (n: Tensor.Tensor) => {
        const l = layerOf(n)
        return l === undefined ? undefined : l % 2
      }]
    ] as const
  ) {
    const scheduler = Scheduler.make(backends, { placement })
    const split = yield* scheduler.allocate(g)
    yield* fill(split.set)
    const wall = yield* time(scheduler.compute(split))
    if (process.env.SPLIT_TRACE === "1") {
      const trace = yield* scheduler.captureNext
      yield* scheduler.compute(split)
      console.error(JSON.stringify(yield* trace))
    }
    const n = split.splits.length
    results.push({
      case: name,
      splits: n,
      wall_ms: wall,
      ratio_to_one: wall / single,
      overhead_us_per_split: n > 1 ? ((wall - single) * 1000) / (n - 1) : 0
    })
  }
  console.log(JSON.stringify({ hidden: H, ffn: F, tokens: T, layers: L, shareDevice, results }))
}).pipe(Effect.scoped, Effect.provide(WebGpu.layer({ devices: 2, shareDevice })))

Effect.runPromise(program).catch((e) => {
  console.error(e)
  process.exit(1)
})
