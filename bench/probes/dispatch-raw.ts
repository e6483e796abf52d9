/**
 * What one dispatch costs on raw Dawn (no project code): N small dispatches in one compute pass, each
 * depending on the one before (one buffer read and written: Dawn puts a barrier between them), against N
 * that write buffers of their own (no barrier), and against N passes each with its own timestamps (how a
 * traced step is measured). GPU time from timestamps around the pass, host time of the encoding, and the
 * wall time to the queue's completion.
 *
 *   tsx dispatch-raw.ts [N]
 */
const N = Number(process.argv[2] ?? 1000)

const kernel = (workgroups: number) => `
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x < ${workgroups * 256}u) { x[gid.x] = x[gid.x] * 0.5 + 1.0; }
}`

const main = async () => {
  const webgpu = await import("webgpu")
  Object.assign(globalThis, webgpu.globals)
  const gpu = webgpu.create(["disable-dawn-features=timestamp_quantization"])
  const adapter = (await gpu.requestAdapter())!
  const device = await adapter.requestDevice({ requiredFeatures: ["timestamp-query"] as Array<GPUFeatureName> })
  console.log(adapter.info.description)
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC
  const query = device.createQuerySet({ type: "timestamp", count: 2 * N })
  const resolved = device.createBuffer({ size: 16 * N, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC })
  const readBack = device.createBuffer({ size: 16 * N, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })

  const measure = async (label: string, workgroups: number, separate: boolean, passes: boolean) => {
    const pipeline = device.createComputePipeline({
      layout: "auto",
      compute: { module: device.createShaderModule({ code: kernel(workgroups) }), entryPoint: "main" }
    })
    const buffers = Array.from(
      { length: separate ? N : 1 },
      () => device.createBuffer({ size: workgroups * 256 * 4, usage })
    )
    const groups = buffers.map((buffer) =>
      device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [{ binding: 0, resource: { buffer } }]
      })
    )
    let best = { gpu: Infinity, host: Infinity, wall: Infinity }
    for (let rep = 0; rep < 4; rep++) {
      const t0 = performance.now()
      const enc = device.createCommandEncoder()
      if (passes) {
        for (let i = 0; i < N; i++) {
          const pass = enc.beginComputePass({
            timestampWrites: { querySet: query, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 }
          })
          pass.setPipeline(pipeline)
          pass.setBindGroup(0, groups[separate ? i : 0])
          pass.dispatchWorkgroups(workgroups)
          pass.end()
        }
      } else {
        const pass = enc.beginComputePass({
          timestampWrites: { querySet: query, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 }
        })
        pass.setPipeline(pipeline)
        for (let i = 0; i < N; i++) {
          pass.setBindGroup(0, groups[separate ? i : 0])
          pass.dispatchWorkgroups(workgroups)
        }
        pass.end()
      }
      const count = passes ? 2 * N : 2
      enc.resolveQuerySet(query, 0, count, resolved, 0)
      enc.copyBufferToBuffer(resolved, 0, readBack, 0, 8 * count)
      const t1 = performance.now()
      device.queue.submit([enc.finish()])
      await device.queue.onSubmittedWorkDone()
      const t2 = performance.now()
      await readBack.mapAsync(GPUMapMode.READ)
      const ticks = new BigInt64Array(readBack.getMappedRange().slice(0, 8 * count))
      readBack.unmap()
      let gpuNs = 0
      for (let i = 0; i < count; i += 2) gpuNs += Number(ticks[i + 1] - ticks[i])
      const r = { gpu: gpuNs / 1e3 / N, host: (t1 - t0) * 1e3 / N, wall: (t2 - t0) * 1e3 / N }
      if (rep > 0 && r.wall < best.wall) best = r
    }
    for (const b of buffers) b.destroy()
    console.log(JSON.stringify({
      probe: "dispatch",
      case: label,
      dispatches: N,
      workgroups,
      gpu_us_per_dispatch: Number(best.gpu.toFixed(2)),
      host_us_per_dispatch: Number(best.host.toFixed(2)),
      wall_us_per_dispatch: Number(best.wall.toFixed(2))
    }))
  }
  for (const wg of [1, 64]) {
    await measure("one pass, each dispatch after the one before (barriers)", wg, false, false)
    await measure("one pass, each dispatch its own buffer (no barriers)", wg, true, false)
    await measure("a pass per dispatch with timestamps (as a trace)", wg, false, true)
  }
  device.destroy()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
