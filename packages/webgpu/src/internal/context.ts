/**
 * Per-device state of the kernel layer: the GPUDevice, its limits and features, the pipeline cache,
 * bind group layouts, a pool of readback staging buffers, and a count of every native buffer we made
 * (so tests can prove that closing a scope frees them).
 *
 * @internal
 */
import { DeviceLost, KernelError } from "@effect-gpu/core/GpuError"
import * as Effect from "effect/Effect"
import type { KernelTarget } from "./kernels/kernel.js"

/** @internal */
export interface Context {
  readonly name: string
  readonly device: GPUDevice
  /** what the kernels are chosen and generated for */
  readonly target: KernelTarget
  readonly features: ReadonlySet<string>
  readonly limits: GPUSupportedLimits
  readonly pipelines: Map<string, Promise<GPUComputePipeline>>
  readonly sources: Map<string, string>
  readonly layouts: Map<string, { readonly group: GPUBindGroupLayout; readonly pipeline: GPUPipelineLayout }>
  /** native buffers alive, ours only */
  live: number
  /** set once the device is lost; every later operation fails with it */
  lost: string | undefined
  /** an uncaptured error (validation, out of memory) not yet reported */
  uncaptured: string | undefined
  /** how fast the device works through dispatch cost, learned from finished command buffers */
  readonly pace: Pace
  /**
   * readback staging buffers not in use: a token's logits are read every step, and creating a mapped
   * buffer each time would add to every step. They are the device's own (freed with it), so `live` leaves
   * them out
   */
  readonly readbacks: Array<GPUBuffer>
  /**
   * queue submissions so far, and the last one seen finished (a completion or a map of a buffer it wrote):
   * the queue runs in order, so a synchronize with nothing after that one returns without a round trip
   * (a decoding step's logits read already waited for the step)
   */
  readonly queue: { submitted: number; done: number }
}

/**
 * @internal: nanoseconds of GPU time per unit of dispatch cost (a flop or a byte moved), and when the
 * queue last ran dry
 */
export interface Pace {
  nsPerCost: number
  lastDoneAt: number
}

/**
 * @internal: a command buffer of `cost` kept the GPU busy `ms`: blend it into the pace. Short ones are
 * ignored (their time is mostly submission and wake-up, not work)
 */
export const learnPace = (ctx: Context, cost: number, ms: number): void => {
  if (ms < 2 || cost <= 0) return
  const measured = (ms * 1e6) / cost
  ctx.pace.nsPerCost = 0.5 * ctx.pace.nsPerCost + 0.5 * measured
}

/** @internal */
export const make = (name: string, device: GPUDevice, target: KernelTarget): Context => {
  const ctx: Context = {
    name,
    device,
    target,
    features: new Set([...device.features]),
    limits: device.limits,
    pipelines: new Map(),
    sources: new Map(),
    layouts: new Map(),
    live: 0,
    lost: undefined,
    uncaptured: undefined,
    // a first guess on the slow side (more, shorter command buffers), corrected by the first computes
    pace: { nsPerCost: target.software === true ? 0.5 : 0.005, lastDoneAt: 0 },
    readbacks: [],
    queue: { submitted: 0, done: 0 }
  }
  device.lost.then((info) => {
    ctx.lost = info.message || info.reason || "lost"
  })
  // an error no scope caught becomes the KernelError of the next operation; handled here, so Dawn does
  // not also print it
  device.addEventListener("uncapturederror", (e) => {
    e.preventDefault()
    ctx.uncaptured ??= (e as GPUUncapturedErrorEvent).error.message
  })
  return ctx
}

/** @internal: the failure a lost device or an unreported uncaptured error means now (reported once) */
export const deadOrFailed = (ctx: Context): DeviceLost | KernelError | undefined => {
  if (ctx.lost !== undefined) return new DeviceLost({ device: ctx.name, reason: ctx.lost })
  if (ctx.uncaptured !== undefined) {
    const detail = ctx.uncaptured
    ctx.uncaptured = undefined
    return new KernelError({ op: "submit", device: ctx.name, detail })
  }
  return undefined
}

/** @internal */
export const checkAlive = (ctx: Context): Effect.Effect<void, DeviceLost | KernelError> =>
  Effect.suspend(() => {
    const e = deadOrFailed(ctx)
    return e === undefined ? Effect.void : Effect.fail(e)
  })

/** @internal: submits command buffers; their serial in the queue, for `finished` */
export const submit = (ctx: Context, buffers: ReadonlyArray<GPUCommandBuffer>): number => {
  ctx.device.queue.submit(buffers)
  return ++ctx.queue.submitted
}

/** @internal: the submission of `serial` was seen finished, and with it every one before */
export const finished = (ctx: Context, serial: number): void => {
  if (serial > ctx.queue.done) ctx.queue.done = serial
}

/** @internal: whether every submission so far was seen finished */
export const idle = (ctx: Context): boolean => ctx.queue.done >= ctx.queue.submitted

/** @internal: a native buffer, counted */
export const createBuffer = (ctx: Context, descriptor: GPUBufferDescriptor): GPUBuffer => {
  const b = ctx.device.createBuffer(descriptor)
  ctx.live++
  return b
}

/** @internal */
export const destroyBuffer = (ctx: Context, b: GPUBuffer): void => {
  b.destroy()
  ctx.live--
}

/** readback buffers kept: sizes up to READBACK_BYTES, READBACK_KEPT of them */
const READBACK_BYTES = 64 << 20
const READBACK_KEPT = 4

/** @internal: a MAP_READ staging buffer of at least `size` bytes: a kept one, else a new one (counted) */
export const takeReadback = (ctx: Context, size: number): GPUBuffer => {
  let best = -1
  ctx.readbacks.forEach((b, i) => {
    if (b.size >= size && (best < 0 || b.size < ctx.readbacks[best].size)) best = i
  })
  if (best >= 0) {
    ctx.live++
    return ctx.readbacks.splice(best, 1)[0]
  }
  // a power of two from 4 KiB: the next read of about this size fits it
  const rounded = size > READBACK_BYTES ? Math.ceil(size / 4) * 4 : Math.max(4096, 2 ** Math.ceil(Math.log2(size)))
  return createBuffer(ctx, { size: rounded, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })
}

/** @internal: an unmapped readback buffer back: kept for the next read, or destroyed */
export const giveReadback = (ctx: Context, b: GPUBuffer): void => {
  if (b.size > READBACK_BYTES || ctx.readbacks.length >= READBACK_KEPT || b.mapState !== "unmapped") {
    destroyBuffer(ctx, b)
    return
  }
  ctx.live--
  ctx.readbacks.push(b)
}

/**
 * @internal: bind group layout for storage bindings with the given access, one letter per binding ("r"
 * read-only, "w" read-write), and one uniform of parameters. Read-only bindings tell the driver that
 * they alias no write (on NVIDIA, loads may take the read-only cache path).
 */
export const layout = (ctx: Context, access: string) => {
  let l = ctx.layouts.get(access)
  if (l === undefined) {
    const entries: Array<GPUBindGroupLayoutEntry> = []
    for (let i = 0; i < access.length; i++) {
      entries.push({
        binding: i,
        visibility: GPUShaderStage.COMPUTE,
        buffer: { type: access[i] === "r" ? "read-only-storage" : "storage" }
      })
    }
    entries.push({
      binding: access.length,
      visibility: GPUShaderStage.COMPUTE,
      // each dispatch's bind group names its own slot of the parameter buffer: a dynamic offset would do
      // the same per setBindGroup, and costs lavapipe dearly per dispatch
      buffer: { type: "uniform" }
    })
    const group = ctx.device.createBindGroupLayout({ entries })
    l = { group, pipeline: ctx.device.createPipelineLayout({ bindGroupLayouts: [group] }) }
    ctx.layouts.set(access, l)
  }
  return l
}

/** @internal: a pipeline from the cache, or compiled now (asynchronously, errors captured) */
export const pipeline = (
  ctx: Context,
  key: string,
  op: string,
  access: string,
  source: string
): Effect.Effect<GPUComputePipeline, KernelError> => {
  let p = ctx.pipelines.get(key)
  if (p === undefined) {
    const device = ctx.device
    p = (async () => {
      device.pushErrorScope("validation")
      const module = device.createShaderModule({ code: source, label: key })
      const info = await module.getCompilationInfo()
      const errors = info.messages.filter((m) => m.type === "error")
      const created = device.createComputePipelineAsync({
        layout: layout(ctx, access).pipeline,
        compute: { module, entryPoint: "main" },
        label: key
      })
      const result = await created.catch((e: unknown) => e as Error)
      const scope = await device.popErrorScope()
      if (errors.length > 0 || scope !== null || result instanceof Error) {
        const detail = [
          ...errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`),
          scope?.message,
          result instanceof Error ? result.message : undefined
        ].filter(Boolean).join("; ")
        throw new Error(detail || "pipeline creation failed")
      }
      return result
    })()
    ctx.pipelines.set(key, p)
    ctx.sources.set(key, source)
    // a failed compile is not cached: the next attempt reports it again
    p.catch(() => ctx.pipelines.delete(key))
  }
  return Effect.tryPromise({
    try: () => p,
    catch: (e) =>
      new KernelError({ op, device: ctx.name, detail: e instanceof Error ? e.message : String(e), cause: e })
  })
}
