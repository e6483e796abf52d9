/**
 * The two matrix-vector kernels on the same product, by GPU time: the vec4 kernel (K-contiguous,
 * 4-aligned, K >= 1024) and the scalar one, which runs when b is viewed at an offset of one element (the
 * vec4 kernel cannot bind that). A measuring aid.
 *
 *   tsx mv-probe.ts [K] [M]
 */
import { Graph, Ops } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { warmUp } from "../case.js"
import { openDawn } from "../dawn.js"
const K = Number(process.argv[2] ?? 4096)
const M = Number(process.argv[3] ?? 1024)
const main = Effect.gen(function*() {
  yield* Effect.promise(() => openDawn())
  const [device] = yield* WebGpu.make({ devices: 1 })
  const backend = yield* device.makeBackend()
  for (let round = 0; round < 2; round++) {
    for (const offset of [0, 4]) {
      yield* Effect.scoped(Effect.gen(function*() {
        const g = Graph.make()
        const a = yield* g.param("a", "f32", [K, M])
        const b = yield* g.input("b", "f32", [K + 4])
        yield* g.output(Ops.mulMat(a, Ops.view(b, [K, 1], [4 * K], offset)))
        const plan = yield* backend.allocate(g.build())
        yield* plan.set(a, Generators.values(1, K * M))
        yield* plan.set(b, Generators.values(2, K + 4))
        yield* warmUp(backend.compute(plan), 2000)
        const ts: Array<number> = []
        let kernel = ""
        for (let i = 0; i < 15; i++) {
          const trace = yield* backend.captureNext
          yield* backend.compute(plan)
          const e = (yield* trace).entries[0]
          kernel = e.kernel.split("|")[0]
          if (i >= 5) ts.push((e.gpuTimeNs ?? NaN) / 1e6)
        }
        ts.sort((p, q) => p - q)
        console.log(
          `${kernel.padEnd(12)} K ${K} M ${M}: median GPU ${ts[5].toFixed(3)} ms = ${
            (4 * K * M / ts[5] / 1e6).toFixed(2)
          } GB/s`
        )
      }))
    }
  }
})
Effect.runPromise(Effect.scoped(main)).then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
