/**
 * A prompt's products alone: each weight shape of a model (M rows of K) against N = 512 activations (f32),
 * per weight type and subgroup-matrix tiling (SRxSC:FRxFC:DEPTH[/SPLITS]), traced: GPU time (median of 10) and
 * TFLOP/s. Which tiling (and split of K) fills the GPU where a 128x128 tile gives few workgroups. A tiling
 * ending in @rows has neighbouring workgroups take row blocks (the default: column blocks); PROBE_TYPES
 * (e.g. f16,q8_0) limits the weight types.
 *
 *   tsx prefill-probe.ts [8b|1b] [TILING|auto[@rows]...]     (bundle it as bench/llm.ts is to run it on the GPU machine)
 */
import { Graph, Ops } from "@effect-gpu/core"
import * as Quant from "@effect-gpu/core/Quant"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { warmUp } from "../case.js"
import { parseOrder, parseTile } from "../tilings.js"

const [model = "8b", ...tileArgs] = process.argv.slice(2)
const N = 512
/** [M, K] of each product a layer runs: q/k/v stacked, the output projection, gate (and up), down */
const SHAPES: Record<string, ReadonlyArray<readonly [number, number]>> = {
  "8b": [[6144, 4096], [4096, 4096], [14336, 4096], [4096, 14336]],
  "1b": [[3072, 2048], [2048, 2048], [8192, 2048], [2048, 8192]]
}
/** PROBE_B=f16: activations in f16 (as a graph that converted them first would pass them) */
const activationType = process.env.PROBE_B === "f16" ? "f16" : "f32"
const tilings = tileArgs.length > 0 ? tileArgs : ["2x2:4x4:32", "1x2:4x4:32", "2x1:2x4:32", "1x1:4x4:32"]

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const probe = (
  tiling: string,
  dtype: "q4_0" | "q8_0" | "f16",
  M: number,
  K: number,
  weights: Float32Array | Uint8Array,
  activations: Float32Array
) =>
  Effect.gen(function*() {
    const [tile, order] = tiling.split("@")
    const [device] = yield* WebGpu.make({
      devices: 1,
      ...(tile === "auto" ? {} : { matrixTile: parseTile(tile) }),
      ...(order !== undefined ? { matrixOrder: parseOrder(order) } : {})
    })
    const backend = yield* device.makeBackend()
    const g = Graph.make()
    const a = yield* g.param("a", dtype, [K, M])
    const b = yield* g.input("b", activationType, [K, N])
    yield* g.output(Ops.mulMat(a, b))
    const plan = yield* backend.allocate(g.build())
    yield* plan.set(a, weights)
    yield* plan.set(b, activations)
    yield* warmUp(backend.compute(plan))
    const us: Array<number> = []
    let kernel = ""
    for (let r = 0; r < 10; r++) {
      const trace = yield* backend.captureNext
      yield* backend.compute(plan)
      // a split product's merge is a dispatch of its own: both count
      const entries = (yield* trace).entries
      kernel = entries.map((e) => e.kernel.split("|")[0]).join(" + ")
      us.push(entries.reduce((t, e) => t + (e.gpuTimeNs ?? 0), 0) / 1e3)
    }
    const t = median(us)
    console.log(
      JSON.stringify({
        M,
        K,
        N,
        dtype,
        b: activationType,
        tiling,
        us: Number(t.toFixed(1)),
        tflops: Number((2 * M * K * N / t / 1e6).toFixed(1)),
        kernel
      })
    )
  }).pipe(
    Effect.scoped,
    Effect.catchAll((e) => Effect.sync(() => console.log(JSON.stringify({ M, K, dtype, tiling, error: String(e) }))))
  )

Effect.runPromise(
  Effect.forEach(SHAPES[model], ([M, K]) => {
    // one set of values a shape, quantized once a type, for every tiling
    const values = Generators.values(1, K * M)
    const activations = Generators.values(2, K * N)
    const types = (process.env.PROBE_TYPES?.split(",") ?? ["q4_0", "q8_0", "f16"]) as ReadonlyArray<
      "q4_0" | "q8_0" | "f16"
    >
    return Effect.forEach(types, (dtype) => {
      const weights = dtype === "f16" ? values : Quant.unsafeQuantize(dtype, values)
      return Effect.forEach(tilings, (tiling) => probe(tiling, dtype, M, K, weights, activations), { discard: true })
    }, { discard: true })
  }, { discard: true })
).catch((e) => {
  console.error(e)
  process.exit(1)
})
