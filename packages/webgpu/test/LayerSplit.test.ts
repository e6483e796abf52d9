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

  // a residual stream (x += W rms_norm(x) * w) fused as a prompt's is, its sums made by the norms reading
  // them and stored over the stream before them (add_rms_norm_store), split with every layer on the other
  // device: each split stores into its own copy of the stream, and the sums cross as they are after the store
  it.scoped("a residual stream whose sums its norms store, split layer by layer, computes what one device does", () =>
    Effect.gen(function*() {
      const [d0, d1] = yield* WebGpu.make({ devices: 2, shareDevice: true })
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [N, 8])
      const w = yield* g.param("w", "f32", [N])
      const ws = yield* Effect.forEach(
        Array.from({ length: LAYERS }, (_, l) => l),
        (l) => g.param(`w${l}`, "f32", [N, N])
      )
      let h: Tensor.Tensor = yield* Ops.scale(x, 2)
      for (let l = 0; l < LAYERS; l++) h = yield* Ops.add(h, Ops.mulMat(ws[l], Ops.mul(Ops.rmsNorm(h, 1e-5), w)))
      const y = yield* g.output(Ops.mul(Ops.rmsNorm(h, 1e-5), w), "y")
      const fused = (yield* d0.makeBackend()).optimize(g.build())
      assert.strictEqual(fused.nodes.filter((n) => n.op._tag === "AddRmsNormStore").length, LAYERS - 1)
      // a fused node's layer: the last layer whose weights a node up to it in the graph's order read
      const layerOfId = new Map<number, number>()
      let layer = 0
      for (const n of fused.nodes) {
        const l = ws.findIndex((wl) => n.src.includes(wl))
        if (l >= 0) layer = l
        layerOfId.set(n.id, layer)
      }
      const fill = <E>(set: (t: Tensor.Tensor, v: Float32Array) => Effect.Effect<void, E>) =>
        Effect.gen(function*() {
          yield* set(x, Generators.values(1, N * 8))
          yield* set(w, Generators.values(2, N))
          for (const [l, wl] of ws.entries()) yield* set(wl, Generators.values(10 + l, N * N))
        })
      const one = yield* d0.makeBackend()
      const plan = yield* one.allocate(fused)
      yield* fill(plan.set)
      yield* one.compute(plan)
      const want = Array.from(yield* plan.get(y))
      const scheduler = Scheduler.make([yield* d0.makeBackend(), yield* d1.makeBackend()], {
        placement: (t) => {
          const l = layerOfId.get(t.id)
          return l === undefined ? undefined : l % 2
        }
      })
      const split = yield* scheduler.allocate(fused)
      assert.isAbove(split.splits.length, 2)
      yield* fill(split.set)
      yield* scheduler.compute(split)
      assert.isBelow(nmse(Array.from(yield* split.get(y)), want), 1e-10)
    }))

  it("byLayer shares layers out by the ratios", () => {
    const place = Scheduler.byLayer({ ratios: [3, 1], layers: 8, layerOf: (t) => t.id })
    const at = (l: number) => place({ id: l } as Tensor.Tensor)
    assert.deepStrictEqual([0, 1, 2, 3, 4, 5, 6, 7].map(at), [0, 0, 0, 0, 0, 0, 1, 1])
    assert.isUndefined(Scheduler.byLayer({ ratios: [1], layers: 1, layerOf: () => undefined })({} as Tensor.Tensor))
  })
})
