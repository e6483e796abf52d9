import type { Device, Tensor } from "@effect-gpu/core"
import { Graph, Ops } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { Effect } from "effect"
import { inject } from "vitest"

/** whether a WebGPU adapter exists here: probed once per run by globalSetup.ts */
export const adapterAvailable: boolean = inject("webgpuAdapter")

/** a small two-layer graph: enough nodes and work to see ordering and aborts */
export const mlp = (n: number, layers: number) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const x = yield* g.input("x", "f32", [n, n])
    let h: Tensor.Tensor = x
    for (let i = 0; i < layers; i++) h = yield* Ops.softMax(Ops.add(Ops.mulMat(h, x), x), { scale: 0.1 })
    const y = yield* g.output(h, "y")
    return { g, x, y }
  })

export const runOn = (device: Device.Device, n: number, layers: number, seed: number, commandBuffers = 1) =>
  Effect.gen(function*() {
    const { g, x, y } = yield* mlp(n, layers)
    const backend = yield* device.makeBackend()
    const plan = yield* backend.allocate(g)
    yield* plan.set(x, Generators.values(seed, n * n))
    yield* backend.compute(plan, { commandBuffers })
    return Array.from(yield* plan.get(y))
  })

/** wall-clock sleep: the layer's tests run under the TestClock */
export const realSleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

export const nmse = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => {
  let num = 0
  let den = 0
  for (let i = 0; i < b.length; i++) {
    num += (a[i] - b[i]) ** 2
    den += b[i] ** 2
  }
  return num / den
}
