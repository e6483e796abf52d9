/**
 * The add case through the backend, with the plan's placement printed and three timings: compute +
 * synchronize per run (the bench's way), 20 computes then one synchronize, and the GPU time of a
 * captured run. Between the steps, the same kernel runs by hand on a fresh buffer of the same device,
 * to find the step after which the device is slower. A measuring aid next to bw-probe.ts.
 *
 *   tsx bw-backend.ts [n]
 */
import { Graph, Ops } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { Effect, Option } from "effect"
import { openDawn } from "./dawn.js"

const n = Number(process.argv[2] ?? 1 << 26)
const bytes = 12 * n
const report = (what: string, ms: number) =>
  console.log(`${what.padEnd(40)} ${ms.toFixed(4)} ms  ${(bytes / ms / 1e6).toFixed(0)} GB/s`)

const main = Effect.gen(function*() {
  yield* Effect.promise(() => openDawn())
  const [device] = yield* WebGpu.make({ devices: 1 })
  const backend = yield* device.makeBackend()
  const gd = Option.getOrThrow(WebGpuDevice.gpuDevice(device))
  const n4 = n / 4
  const code = `@group(0) @binding(0) var<storage, read_write> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> d: array<vec4<f32>>;
@compute @workgroup_size(256) fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let base = (wid.x + wid.y * nwg.x) * 1024u + lid;
  var xs: array<vec4<f32>, 4>; var ys: array<vec4<f32>, 4>;
  for (var j = 0u; j < 4u; j++) { let i = base + j * 256u; if (i < ${n4}u) { xs[j] = a[i]; ys[j] = b[i]; } }
  for (var j = 0u; j < 4u; j++) { let i = base + j * 256u; if (i < ${n4}u) { d[i] = xs[j] + ys[j]; } }
}`
  const pipeline = gd.createComputePipeline({
    layout: "auto",
    compute: { module: gd.createShaderModule({ code }), entryPoint: "main" }
  })
  const byHand = (label: string, target?: { buffer: GPUBuffer; offsets: ReadonlyArray<number> }) =>
    Effect.gen(function*() {
      const fresh = target === undefined ? gd.createBuffer({ size: bytes, usage: 0x80 | 0x4 | 0x8 }) : undefined
      const buffer = target?.buffer ?? fresh!
      const offsets = target?.offsets ?? [0, 4 * n, 8 * n]
      const group = gd.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: offsets.map((offset, binding) => ({ binding, resource: { buffer, offset, size: 4 * n } }))
      })
      const ms: Array<number> = []
      for (let round = 0; round < 4; round++) {
        const enc = gd.createCommandEncoder()
        for (let i = 0; i < 20; i++) {
          const pass = enc.beginComputePass()
          pass.setPipeline(pipeline)
          pass.setBindGroup(0, group)
          pass.dispatchWorkgroups(Math.ceil(n4 / 1024))
          pass.end()
        }
        const t = performance.now()
        gd.queue.submit([enc.finish()])
        yield* Effect.promise(() => gd.queue.onSubmittedWorkDone())
        if (round > 0) ms.push((performance.now() - t) / 20)
      }
      fresh?.destroy()
      if (label !== "quiet") report(`by hand, ${label}`, Math.min(...ms))
    })
  yield* byHand("fresh buffer, at start")
  const g = Graph.make()
  const a = yield* g.input("a", "f32", [n])
  const b = yield* g.input("b", "f32", [n])
  const d = yield* Ops.add(a, b)
  yield* g.output(d)
  const plan = yield* backend.allocate(backend.optimize(g.build()))
  const onPlan = { buffer: plan.buffer.native as GPUBuffer, offsets: [a, b, d].map((t) => plan.location(t)!.offset) }
  yield* byHand("fresh buffer, after allocate")
  yield* byHand("plan's buffer, after allocate", onPlan)
  const va = Generators.values(1, n, { min: 0.05, max: 0.5 })
  const vb = Generators.values(2, n, { min: 0.05, max: 0.5 })
  yield* byHand("fresh buffer, after generating values")
  // WARM_MS: keep the GPU busy that long, to tell a clock state from a lasting slowdown
  const warm = Number(process.env.WARM_MS ?? 0)
  for (let k = 0; k < 6 && warm > 0; k++) {
    const t0 = performance.now()
    while (performance.now() - t0 < warm / 6) yield* byHand("quiet", undefined)
    yield* byHand(`fresh buffer, after ${((k + 1) * warm / 6).toFixed(0)} ms busy`)
  }
  yield* plan.set(a, va)
  yield* byHand("fresh buffer, after set a")
  yield* plan.set(b, vb)
  yield* byHand("fresh buffer, after set b")
  yield* byHand("plan's buffer, after set", onPlan)
  for (let i = 0; i < 20; i++) yield* Effect.zipRight(backend.compute(plan), backend.synchronize)
  yield* byHand("fresh buffer, after 20 computes")
  const per: Array<number> = []
  for (let i = 0; i < 21; i++) {
    const t = performance.now()
    yield* backend.compute(plan)
    yield* backend.synchronize
    per.push(performance.now() - t)
  }
  report("compute + synchronize, median", per.sort((p, q) => p - q)[10])
  const t = performance.now()
  for (let i = 0; i < 20; i++) yield* backend.compute(plan)
  yield* backend.synchronize
  report("20 computes, one synchronize", (performance.now() - t) / 20)
  const trace = yield* backend.captureNext
  yield* backend.compute(plan)
  const e = (yield* trace).entries
  report(`captured GPU time (${e.map((x) => x.kernel.split("|")[0]).join(",")})`, (e[0].gpuTimeNs ?? NaN) / 1e6)
  yield* byHand("fresh buffer, at the end")
})

Effect.runPromise(Effect.scoped(main)).then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
