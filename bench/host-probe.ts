/**
 * Host cost of one compute + synchronize of a one-node graph (256-element add), against the same
 * dispatch submitted by hand on the same device and awaited with onSubmittedWorkDone. Run with
 * `node --import tsx --cpu-prof host-probe.ts` to see where the difference goes. A measuring aid.
 *
 *   tsx host-probe.ts [iterations]
 */
import { Graph, Ops } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { Effect, Option } from "effect"
import { openDawn } from "./dawn.js"

const iterations = Number(process.argv[2] ?? 3000)

const main = Effect.gen(function*() {
  yield* Effect.promise(() => openDawn())
  const [device] = yield* WebGpu.make({ devices: 1 })
  const backend = yield* device.makeBackend()
  const gd = Option.getOrThrow(WebGpuDevice.gpuDevice(device))
  const g = Graph.make()
  const x = yield* g.input("x", "f32", [256])
  const c = yield* g.input("c", "f32", [256])
  yield* g.output(Ops.add(x, c))
  const plan = yield* backend.allocate(g.build())
  yield* plan.set(x, Generators.values(1, 256))
  yield* plan.set(c, Generators.values(2, 256))
  const time = (label: string, body: Effect.Effect<void, unknown>) =>
    Effect.gen(function*() {
      for (let i = 0; i < 200; i++) yield* body
      const t = performance.now()
      for (let i = 0; i < iterations; i++) yield* body
      console.log(`${label.padEnd(40)} ${((performance.now() - t) / iterations * 1e3).toFixed(1)} us`)
    })
  const code = `@group(0) @binding(0) var<storage, read_write> d: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3u) { d[i.x] = d[i.x] + 1.0; }`
  const pipeline = gd.createComputePipeline({
    layout: "auto",
    compute: { module: gd.createShaderModule({ code }), entryPoint: "main" }
  })
  const buffer = gd.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE })
  const group = gd.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer } }]
  })
  /** the same one dispatch, encoded and submitted by hand */
  const submit = () => {
    const enc = gd.createCommandEncoder()
    const pass = enc.beginComputePass()
    pass.setPipeline(pipeline)
    pass.setBindGroup(0, group)
    pass.dispatchWorkgroups(4)
    pass.end()
    gd.queue.submit([enc.finish()])
  }
  const submitByHand = Effect.sync(submit)
  const byHand = Effect.promise(() => {
    submit()
    return gd.queue.onSubmittedWorkDone()
  })
  if (process.env.PROFILE === "compute") {
    yield* time("backend: compute only", backend.compute(plan))
    yield* time("backend: compute only", backend.compute(plan))
    return
  }
  if (process.env.PROFILE === "sync") {
    yield* time("backend: synchronize only (idle queue)", backend.synchronize)
    yield* time("backend: synchronize only (idle queue)", backend.synchronize)
    return
  }
  for (let round = 0; round < 2; round++) {
    yield* time("by hand: encode, submit (no wait)", submitByHand)
    yield* Effect.promise(() => gd.queue.onSubmittedWorkDone())
    yield* time("by hand: encode, submit, wait", byHand)
    yield* time("backend: compute + synchronize", Effect.zipRight(backend.compute(plan), backend.synchronize))
    yield* time("backend: compute only", backend.compute(plan))
    yield* time(
      "backend: compute, then a raw wait",
      Effect.zipRight(backend.compute(plan), Effect.promise(() => gd.queue.onSubmittedWorkDone()))
    )
    yield* time("backend: synchronize only (idle queue)", backend.synchronize)
    yield* time("raw wait only (idle queue)", Effect.promise(() => gd.queue.onSubmittedWorkDone()))
    yield* backend.synchronize
  }
  buffer.destroy()
})

Effect.runPromise(Effect.scoped(main)).then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
