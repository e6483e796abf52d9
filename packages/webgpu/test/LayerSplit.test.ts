import { Buffer, Graph, Ops, Scheduler } from "@effect-gpu/core"
import type { Tensor } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { adapterAvailable, nmse } from "./utils.js"

const N = 64
const LAYERS = 4

/** an MLP of 4 layers, h = softmax(h W + x) * 0.1, each layer's nodes remembered by id */
const mlp = Effect.gen(function*() {
  const g = Graph.make()
  const x = yield* g.input("x", "f32", [N, N])
  const ws = yield* Effect.forEach(Array.from({ length: LAYERS }, (_, l) => l), (l) => g.param(`w${l}`, "f32", [N, N]))
  const layerOfId = new Map<number, number>()
  let h: Tensor.Tensor = x
  for (let l = 0; l < LAYERS; l++) {
    const first = (yield* Ops.scale(x, 1)).id // ids are creation order: this layer's nodes come after it
    h = yield* Ops.scale(Ops.softMax(Ops.add(Ops.mulMat(ws[l], h), x)), 0.1)
    for (let id = first + 1; id <= h.id; id++) layerOfId.set(id, l)
  }
  const y = yield* g.output(h, "y")
  return { g, x, ws, y, layerOf: (t: Tensor.Tensor) => layerOfId.get(t.id) }
})

describe.skipIf(!adapterAvailable)("layer split over two WebGPU devices", () => {
  // a GPUDevice each (copies through the host), and virtual devices sharing one (copies on the GPU)
  for (const shareDevice of [false, true]) {
    it.scoped(`an MLP split by layers (1:1) over two devices computes what one device does (shared: ${shareDevice})`, () =>
      Effect.gen(function*() {
        const [d0, d1] = yield* WebGpu.make({ devices: 2, shareDevice })
        const [g0, g1] = [WebGpuDevice.gpuDevice(d0), WebGpuDevice.gpuDevice(d1)].map(Option.getOrUndefined)
        assert.strictEqual(g0 === g1, shareDevice)
        assert.strictEqual(Buffer.sameQueue(d0.bufferType, d1.bufferType), shareDevice)
        const { g, layerOf, ws, x, y } = yield* mlp
        const fill = <E>(set: (t: Tensor.Tensor, v: Float32Array) => Effect.Effect<void, E>) =>
          Effect.gen(function*() {
            yield* set(x, Generators.values(1, N * N))
            for (const [l, w] of ws.entries()) yield* set(w, Generators.values(10 + l, N * N))
          })
        // one device
        const one = yield* d0.makeBackend()
        const plan = yield* one.allocate(g)
        yield* fill(plan.set)
        yield* one.compute(plan)
        const want = Array.from(yield* plan.get(y))
        // two, by layers
        const scheduler = Scheduler.make([yield* d0.makeBackend(), yield* d1.makeBackend()], {
          placement: Scheduler.byLayer({ ratios: [1, 1], layers: LAYERS, layerOf })
        })
        const split = yield* scheduler.allocate(g)
        assert.deepStrictEqual(split.splits.map((s) => s.backend.device.name), ["WebGPU0", "WebGPU1"])
        // the activation crosses once, at the boundary of layers 1 and 2
        assert.deepStrictEqual(split.splits.map((s) => s.copies.length), [0, 1])
        yield* fill(split.set)
        yield* scheduler.compute(split)
        assert.isBelow(nmse(Array.from(yield* split.get(y)), want), 1e-10)
      }))
  }

  it("byLayer shares layers out by the ratios", () => {
    const place = Scheduler.byLayer({ ratios: [3, 1], layers: 8, layerOf: (t) => t.id })
    const at = (l: number) => place({ id: l } as Tensor.Tensor)
    assert.deepStrictEqual([0, 1, 2, 3, 4, 5, 6, 7].map(at), [0, 0, 0, 0, 0, 0, 1, 1])
    assert.isUndefined(Scheduler.byLayer({ ratios: [1], layers: 1, layerOf: () => undefined })({} as Tensor.Tensor))
  })
})
