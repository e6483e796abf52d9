/**
 * What the raw-Dawn probes share: a device with subgroups and the adapter's buffer limits, a kernel
 * compiled with its errors reported, dispatches of it submitted in one command buffer, a buffer read back,
 * and a timing per dispatch once the GPU's clock has settled. Not project code: measuring aids.
 */
import { openDawn } from "./dawn.js"

export const openRawDevice = async (toggles: ReadonlyArray<string> = []) => {
  const gpu = await openDawn(toggles)
  const adapter = (await gpu.requestAdapter({ powerPreference: "high-performance" }))!
  const L = adapter.limits
  const device = await adapter.requestDevice({
    requiredFeatures: ["subgroups"] as Array<GPUFeatureName>,
    requiredLimits: { maxStorageBufferBindingSize: L.maxStorageBufferBindingSize, maxBufferSize: L.maxBufferSize }
  })
  return { device, name: `${adapter.info.vendor} ${adapter.info.device || adapter.info.description}` }
}

/** `run(times)`: `times` dispatches of the kernel, each in its own pass, one submit, awaited; undefined
 * (with the compiler's errors printed) when the kernel does not compile */
export const dispatcher = async (
  device: GPUDevice,
  name: string,
  code: string,
  bindings: ReadonlyArray<GPUBufferBinding>,
  groups: number
): Promise<((times: number) => Promise<void>) | undefined> => {
  const module = device.createShaderModule({ code })
  const info = await module.getCompilationInfo()
  if (info.messages.some((m) => m.type === "error")) {
    console.log(`${name}: ${info.messages.map((m) => m.message).join("; ")}`)
    return undefined
  }
  const pipeline = await device.createComputePipelineAsync({ layout: "auto", compute: { module, entryPoint: "main" } })
  const group = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: bindings.map((resource, binding) => ({ binding, resource }))
  })
  const x = Math.min(groups, 65535)
  return async (times: number) => {
    const e = device.createCommandEncoder()
    for (let i = 0; i < times; i++) {
      const p = e.beginComputePass()
      p.setPipeline(pipeline)
      p.setBindGroup(0, group)
      p.dispatchWorkgroups(x, Math.ceil(groups / x))
      p.end()
    }
    device.queue.submit([e.finish()])
    await device.queue.onSubmittedWorkDone()
  }
}

/** `bytes` f32 from a binding, through a staging buffer */
export const readBack = async (device: GPUDevice, from: GPUBufferBinding, bytes: number) => {
  const staging = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })
  const e = device.createCommandEncoder()
  e.copyBufferToBuffer(from.buffer, from.offset ?? 0, staging, 0, bytes)
  device.queue.submit([e.finish()])
  await staging.mapAsync(GPUMapMode.READ)
  const got = new Float32Array(staging.getMappedRange().slice(0))
  staging.destroy()
  return got
}

/**
 * ms per dispatch, sorted, of 7 batches of 50 after ~2 s of load (the GPU's clock climbs only under load);
 * the median is [3]
 */
export const settledMs = async (run: (times: number) => Promise<void>) => {
  const t0 = performance.now()
  while (performance.now() - t0 < 2000) await run(50)
  const ms: Array<number> = []
  for (let r = 0; r < 7; r++) {
    const t = performance.now()
    await run(50)
    ms.push((performance.now() - t) / 50)
  }
  return ms.sort((p, q) => p - q)
}

/** one line: the median time, the rate of `bytes` moved at the median and at the best, and the error */
export const report = (name: string, ms: ReadonlyArray<number>, bytes: number, nmse: number) =>
  console.log(
    `${name.padEnd(22)} ${(ms[3] * 1e3).toFixed(2)} us  ${(bytes / ms[3] / 1e9).toFixed(3)} TB/s  (best ${
      (bytes / ms[0] / 1e9).toFixed(3)
    })  nmse ${nmse.toExponential(1)}`
  )

/**
 * A device with f16 subgroup matrices and the adapter's buffer and workgroup limits, or undefined (said
 * once) where the adapter has none
 */
export const openMatrixDevice = async (gpu: GPU) => {
  const adapter = (await gpu.requestAdapter({ powerPreference: "high-performance" }))!
  const wanted = ["shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"] as const
  if (!wanted.every((f) => adapter.features.has(f))) {
    console.log("no subgroup matrices on this adapter")
    return undefined
  }
  const L = adapter.limits
  const device = await adapter.requestDevice({
    requiredFeatures: [...wanted] as Array<GPUFeatureName>,
    requiredLimits: {
      maxStorageBufferBindingSize: L.maxStorageBufferBindingSize,
      maxBufferSize: L.maxBufferSize,
      maxComputeWorkgroupStorageSize: L.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: L.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: L.maxComputeWorkgroupSizeX
    }
  })
  return { device, name: `${adapter.info.vendor} ${adapter.info.device || adapter.info.description}` }
}

/** one kernel of a square product for `timeProducts`; `check`: compare 64 of its results with the CPU */
export interface ProductKernel {
  readonly name: string
  readonly code: string
  readonly check: boolean
}

/**
 * Square products d = b . a^T of N (a, b: N rows of N; d[n][m] in `d`; bindings 0-2, then any more
 * buffers, e.g. a uniform of parameters), one kernel after another: each
 * compiled, run once and, where asked, checked against A and B on 64 results, then timed; a line each,
 * and Dawn's validation errors at the end
 */
export const timeProducts = async (
  device: GPUDevice,
  N: number,
  [A, B]: readonly [Float32Array, Float32Array],
  buffers: readonly [GPUBuffer, GPUBuffer, GPUBuffer, ...Array<GPUBuffer>],
  groups: number,
  kernels: ReadonlyArray<ProductKernel>
) => {
  device.pushErrorScope("validation")
  const flops = 2 * N ** 3
  for (const { check, code, name } of kernels) {
    const go = await dispatcher(device, name, code, buffers.map((buffer) => ({ buffer })), groups)
    if (go === undefined) continue
    await go(1)
    let error = ""
    if (check) {
      const got = await readBack(device, { buffer: buffers[2] }, N * N * 4)
      let [err, norm] = [0, 0]
      for (let s = 0; s < 64; s++) {
        const [m, n] = [(s * 997) % N, (s * 1231 + 7) % N]
        let want = 0
        for (let k = 0; k < N; k++) want += A[m * N + k] * B[n * N + k]
        err += (got[n * N + m] - want) ** 2
        norm += want ** 2
      }
      error = `  nmse ${(err / norm).toExponential(1)}`
    }
    const ms = await settledMs(go)
    console.log(
      `${name.padEnd(20)} ${ms[3].toFixed(3)} ms  ${(flops / ms[3] / 1e9).toFixed(1)} TFLOP/s (best ${
        (flops / ms[0] / 1e9).toFixed(1)
      })${error}`
    )
  }
  const error = await device.popErrorScope()
  if (error !== null) console.log(`validation: ${error.message}`)
}
