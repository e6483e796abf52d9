/**
 * What the raw-Dawn probes share (no project code, to measure designs apart from the kernel machinery): a
 * device of the first adapter with the H200's toggles (f16 on NVIDIA, unsafe APIs for f16 subgroup
 * matrices, timestamps unquantized) and the adapter's largest buffers and workgroup memory, an upload of
 * host data into a storage buffer, and the GPU time of a pipeline's dispatches.
 */
/** the Dawn instances made here: one collected while its device runs crashes Dawn's threads (seen as a
 * futex or mutex error at a later mapAsync, now and then) */
const instances: Array<GPU> = []

export const rawDevice = async (features: ReadonlyArray<string>) => {
  const webgpu = await import("webgpu")
  Object.assign(globalThis, webgpu.globals)
  const gpu = webgpu.create([
    "enable-dawn-features=vulkan_enable_f16_on_nvidia,allow_unsafe_apis",
    "disable-dawn-features=timestamp_quantization"
  ])
  instances.push(gpu)
  const adapter = (await gpu.requestAdapter())!
  const device = await adapter.requestDevice({
    requiredFeatures: ["timestamp-query", ...features] as Array<GPUFeatureName>,
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
      maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize
    }
  })
  const storage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC
  /** a storage buffer (16-byte multiple) holding `data` */
  const upload = (data: ArrayBufferView) => {
    const buf = device.createBuffer({ size: Math.ceil(data.byteLength / 16) * 16, usage: storage })
    device.queue.writeBuffer(buf, 0, data.buffer, data.byteOffset, data.byteLength)
    return buf
  }
  const query = device.createQuerySet({ type: "timestamp", count: 2 })
  const resolved = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC })
  const stamps = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })
  /**
   * GPU time of a pass (us) that `encode` fills, each of `reps` passes after a first one, sorted; the first
   * pass's encoder also goes to `first` (a copy of the result out for a check)
   */
  const timePasses = async (
    encode: (pass: GPUComputePassEncoder) => void,
    reps: number,
    first?: (encoder: GPUCommandEncoder) => void
  ) => {
    const times: Array<number> = []
    for (let rep = 0; rep <= reps; rep++) {
      const enc = device.createCommandEncoder()
      const pass = enc.beginComputePass({
        timestampWrites: { querySet: query, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 }
      })
      encode(pass)
      pass.end()
      enc.resolveQuerySet(query, 0, 2, resolved, 0)
      enc.copyBufferToBuffer(resolved, 0, stamps, 0, 16)
      if (rep === 0) first?.(enc)
      device.queue.submit([enc.finish()])
      await stamps.mapAsync(GPUMapMode.READ)
      const t = new BigUint64Array(stamps.getMappedRange().slice(0))
      stamps.unmap()
      if (rep > 0) times.push(Number(t[1] - t[0]) / 1e3)
    }
    return times.sort((x, y) => x - y)
  }
  /**
   * GPU time per dispatch (us): `dispatches` dispatches of `grid` over `binds` in turn in one pass, the second
   * best of three after a first pass, whose encoder `first` also gets (a copy of the result out for a check)
   */
  const timeDispatches = async (
    pipeline: GPUComputePipeline,
    binds: ReadonlyArray<GPUBindGroup>,
    grid: readonly [number, number],
    dispatches: number,
    first?: (encoder: GPUCommandEncoder) => void
  ) => {
    const times = await timePasses(
      (pass) => {
        pass.setPipeline(pipeline)
        for (let i = 0; i < dispatches; i++) {
          pass.setBindGroup(0, binds[i % binds.length])
          pass.dispatchWorkgroups(grid[0], grid[1])
        }
      },
      3,
      first
    )
    return times[1] / dispatches
  }
  return { adapter, device, storage, upload, timeDispatches }
}
