import { Cpu, Registry, Scheduler } from "@effect-gpu/core"
import { GgmlReference } from "@effect-gpu/testing"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { loadReference } from "../../testing/test/reference.js"
import { adapterAvailable } from "./utils.js"

// every ggml case through a WebGPU / CPU split, compute nodes pinned alternately to each (placement is
// asked once per compute node, in order): the result must still be ggml's, as on one backend
describe.skipIf(!adapterAvailable)("ggml's cases split over WebGPU and the CPU", () => {
  it.layer(WebGpu.layer({ devices: 1 }))((it) => {
    for (const set of ["ggml", "ggml-next"] as const) {
      const suite = loadReference(set)
      it.scoped(`${set}: all ${suite.cases.length} cases`, () =>
        Effect.gen(function*() {
          const gpu = yield* (yield* Registry.deviceByName("WebGPU0")).makeBackend()
          const cpu = yield* Cpu.make().makeBackend()
          const failed: Array<string> = []
          const unsplit: Array<string> = []
          let split = 0
          for (const c of suite.cases) {
            let next = 0
            const scheduler = Scheduler.make([gpu, cpu], { placement: () => next++ % 2 })
            const outcome = yield* Effect.scoped(GgmlReference.runScheduled(suite, c, scheduler))
            if (!outcome.passed) failed.push(`${c.name}: ${outcome.detail} (bound ${outcome.bound})`)
            // every case of several compute nodes ran over both backends
            if (outcome.nodes > 1 && outcome.splits < 2) unsplit.push(c.name)
            if (outcome.splits > 1) split++
          }
          assert.deepStrictEqual(failed, [])
          assert.deepStrictEqual(unsplit, [])
          assert.isAbove(split, 0)
        }), 300_000)
    }
  })
})
