/**
 * Element-wise bandwidth on raw Dawn, outside the backend: variants of `d = a + b` over n f32 (default
 * 64 Mi), each timed as 20 dispatches in one submit (the submit round trip is amortised), to find what
 * the backend's flat kernel loses against a plain copy. Not project code: a measuring aid.
 *
 *   tsx bw-probe.ts [n]
 */
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { Effect, Option, Scope } from "effect"
import { openDawn } from "./dawn.js"

const n = Number(process.argv[2] ?? 1 << 26)

const main = async () => {
  const gpu = await openDawn()
  const adapter =
    (await gpu.requestAdapter(process.env.POWER === "default" ? {} : { powerPreference: "high-performance" }))!
  const L = adapter.limits
  // FEATURES=all asks for every feature the backend asks for, to see whether one changes the code
  const features = process.env.FEATURES === "all"
    ? (["shader-f16", "subgroups", "timestamp-query", "chromium-experimental-subgroup-matrix"] as const).filter((f) =>
      adapter.features.has(f)
    )
    : (process.env.FEATURES ?? "").split(",").filter((f) => f !== "" && adapter.features.has(f))
  console.log(`features: ${features.join(", ") || "none"}`)
  // DEVICE=library: the device WebGpu.make opens (to tell its settings from the raw device's)
  const device = process.env.DEVICE === "library"
    ? await Effect.runPromise(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const [d] = yield* Scope.extend(WebGpu.make({ devices: 1 }), scope)
      return Option.getOrThrow(WebGpuDevice.gpuDevice(d))
    }))
    : await adapter.requestDevice({
      requiredFeatures: features as Array<GPUFeatureName>,
      requiredLimits: {
        maxStorageBufferBindingSize: L.maxStorageBufferBindingSize,
        maxBufferSize: L.maxBufferSize,
        // LIMITS=all raises what the backend raises
        ...(process.env.LIMITS === "all"
          ? {
            maxComputeWorkgroupStorageSize: L.maxComputeWorkgroupStorageSize,
            maxComputeInvocationsPerWorkgroup: L.maxComputeInvocationsPerWorkgroup,
            maxStorageBuffersPerShaderStage: L.maxStorageBuffersPerShaderStage,
            maxComputeWorkgroupSizeX: L.maxComputeWorkgroupSizeX,
            maxComputeWorkgroupSizeY: L.maxComputeWorkgroupSizeY
          }
          : {})
      }
    })
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC
  const bytes = n * 4
  const buf = (size: number) => device.createBuffer({ size, usage })
  const [a, b, d] = [buf(bytes), buf(bytes), buf(bytes)]
  const one = buf(bytes * 3)
  // random data unless FILL=pattern: a repeating pattern may compress in the memory system
  const pattern = process.env.FILL === "pattern"
  const fill = new Float32Array(1 << 22).map((_, i) => pattern ? 1 + (i % 97) / 97 : 0.05 + 0.45 * Math.random())
  for (const [t, off] of [[a, 0], [b, 0], [one, 0], [one, bytes]] as const) {
    for (let o = 0; o < bytes; o += fill.byteLength) {
      device.queue.writeBuffer(t, off + o, fill, 0, Math.min(fill.length, (bytes - o) / 4))
    }
  }
  const time = async (
    name: string,
    code: string,
    entries: Array<GPUBindGroupEntry>,
    groups: number,
    movedBytes = 3 * bytes,
    explicit = false
  ) => {
    const module = device.createShaderModule({ code })
    // explicit: a pipeline layout of storage bindings and a uniform, made asynchronously, as the backend does
    const layout = explicit
      ? device.createPipelineLayout({
        bindGroupLayouts: [device.createBindGroupLayout({
          entries: entries.map((e, i) => ({
            binding: e.binding,
            visibility: GPUShaderStage.COMPUTE,
            buffer: { type: i === entries.length - 1 ? "uniform" : "storage" } as const
          }))
        })]
      })
      : "auto"
    const pipeline = explicit
      ? await device.createComputePipelineAsync({ layout, compute: { module, entryPoint: "main" } })
      : device.createComputePipeline({ layout, compute: { module, entryPoint: "main" } })
    const group = device.createBindGroup({
      layout: explicit ? pipeline.getBindGroupLayout(0) : pipeline.getBindGroupLayout(0),
      entries
    })
    const x = Math.min(groups, 65535)
    const y = Math.ceil(groups / x)
    const go = async (times: number) => {
      const e = device.createCommandEncoder()
      for (let i = 0; i < times; i++) {
        const p = e.beginComputePass()
        p.setPipeline(pipeline)
        p.setBindGroup(0, group)
        p.dispatchWorkgroups(x, y)
        p.end()
      }
      device.queue.submit([e.finish()])
      await device.queue.onSubmittedWorkDone()
    }
    await go(3)
    const ms: Array<number> = []
    for (let r = 0; r < 5; r++) {
      const t = performance.now()
      await go(20)
      ms.push((performance.now() - t) / 20)
    }
    ms.sort((p, q) => p - q)
    const med = ms[2]
    // one dispatch per submit, as the backend's bench case runs it (includes the submit round trip)
    const single: Array<number> = []
    for (let r = 0; r < 21; r++) {
      const t = performance.now()
      await go(1)
      single.push(performance.now() - t)
    }
    single.sort((p, q) => p - q)
    const one = single[10]
    console.log(
      `${name.padEnd(44)} ${med.toFixed(4)} ms  ${(movedBytes / med / 1e6).toFixed(0)} GB/s  (min ${
        (movedBytes / ms[0] / 1e6).toFixed(0)
      }); one per submit ${one.toFixed(4)} ms ${(movedBytes / one / 1e6).toFixed(0)} GB/s`
    )
  }
  const head = (ro: boolean) =>
    `@group(0) @binding(0) var<storage, ${ro ? "read" : "read_write"}> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, ${ro ? "read" : "read_write"}> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> d: array<vec4<f32>>;`
  const sep = [{ binding: 0, resource: { buffer: a } }, { binding: 1, resource: { buffer: b } }, {
    binding: 2,
    resource: { buffer: d }
  }]
  const n4 = n / 4
  const lin = "let g = wid.x + wid.y * nwg.x;"
  const entry =
    "@compute @workgroup_size(256) fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32) {"
  const perThread = (k: number, ro: boolean) =>
    `${head(ro)}
${entry}
  ${lin}
  let base = g * ${256 * k}u + lid;
  var xs: array<vec4<f32>, ${k}>; var ys: array<vec4<f32>, ${k}>;
  for (var j = 0u; j < ${k}u; j++) { let i = base + j * 256u; if (i < ${n4}u) { xs[j] = a[i]; ys[j] = b[i]; } }
  for (var j = 0u; j < ${k}u; j++) { let i = base + j * 256u; if (i < ${n4}u) { d[i] = xs[j] + ys[j]; } }
}`
  const stride = (ro: boolean) =>
    `${head(ro)}
${entry}
  var i = (wid.x + wid.y * nwg.x) * 256u + lid;
  let step = nwg.x * nwg.y * 256u;
  loop { if (i >= ${n4}u) { break; } d[i] = a[i] + b[i]; i += step; }
}`
  for (const k of [1, 2, 4, 8]) {
    await time(`separate, read-only, ${k} vec4/thread`, perThread(k, true), sep, Math.ceil(n4 / 256 / k))
  }
  await time(`separate, read_write, 4 vec4/thread`, perThread(4, false), sep, Math.ceil(n4 / 256 / 4))
  const ranges = [0, 1, 2].map((binding) => ({
    binding,
    resource: { buffer: one, offset: binding * bytes, size: bytes }
  }))
  for (const k of [1, 4]) {
    await time(`one buffer, binding ranges, ${k} vec4/thread`, perThread(k, false), ranges, Math.ceil(n4 / 256 / k))
  }
  // the backend's generated kernel for this add (flat4:Add), parameters in a uniform
  const fields = ["a", "b", "d"].flatMap((o) =>
    ["o", "ne0", "ne1", "ne2", "ne3", "nb0", "nb1", "nb2", "nb3"].map((f) => `${o}_${f}`)
  )
  const values = [0, n, 1, 1, 1, 1, n, n, n]
  const uniform = device.createBuffer({ size: 256, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST })
  device.queue.writeBuffer(uniform, 0, new Uint32Array([...values, ...values, ...values]))
  const ours = `${head(false).replace(/var<storage, read_write> (\w): /g, "var<storage, read_write> B$1: ")}
struct Params { ${fields.map((f) => `${f}: u32,`).join(" ")} }
@group(0) @binding(3) var<uniform> P: Params;
fn ld4_a(i: u32) -> vec4<f32> { return vec4<f32>(Ba[i]); }
fn ld4_b(i: u32) -> vec4<f32> { return vec4<f32>(Bb[i]); }
fn st4_d(i: u32, v: vec4<f32>) { Bd[i] = vec4<f32>(v); }
${entry}
  let n = P.d_ne0 * P.d_ne1 * P.d_ne2 * P.d_ne3 / 4u;
  let base = (wid.x + wid.y * nwg.x) * 1024u + lid;
  var xs: array<vec4<f32>, 4>;
  var ys: array<vec4<f32>, 4>;
  for (var k = 0u; k < 4u; k++) { let i = base + k * 256u; if (i < n) { xs[k] = ld4_a(P.a_o / 4u + i); ys[k] = ld4_b(P.b_o / 4u + i); } }
  for (var k = 0u; k < 4u; k++) { let i = base + k * 256u; if (i < n) { st4_d(P.d_o / 4u + i, xs[k] + ys[k]); } }
}`
  const withUniform = [...ranges, { binding: 3, resource: { buffer: uniform } }]
  await time(`backend's kernel, binding ranges`, ours, withUniform, Math.ceil(n4 / 1024))
  await time(`backend's kernel, explicit layout`, ours, withUniform, Math.ceil(n4 / 1024), 3 * bytes, true)
  for (const groups of [1056, 4224, 16896, 65535]) {
    await time(`separate, read-only, grid-stride ${groups} groups`, stride(true), sep, groups)
  }
  const copy = `@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> d: array<vec4<f32>>;
${entry}
  let i = (wid.x + wid.y * nwg.x) * 256u + lid;
  if (i < ${n4}u) { d[i] = a[i] * 1.0001; }
}`
  await time(
    `copy, 1 vec4/thread`,
    copy,
    [{ binding: 0, resource: { buffer: a } }, { binding: 1, resource: { buffer: d } }],
    Math.ceil(n4 / 256),
    2 * bytes
  )
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
