/**
 * What the raw-Dawn probes share (no project code, to measure designs apart from the kernel machinery): a
 * device of the first adapter with the H200's toggles (f16 on NVIDIA, unsafe APIs for f16 subgroup
 * matrices, timestamps unquantized) and the adapter's largest buffers and workgroup memory, and an upload of
 * host data into a storage buffer.
 */
export const rawDevice = async (features: ReadonlyArray<string>) => {
  const webgpu = await import("webgpu")
  Object.assign(globalThis, webgpu.globals)
  const gpu = webgpu.create([
    "enable-dawn-features=vulkan_enable_f16_on_nvidia,allow_unsafe_apis",
    "disable-dawn-features=timestamp_quantization"
  ])
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
  return { adapter, device, storage, upload }
}
