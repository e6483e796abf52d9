/**
 * Native buffers and the byte operations on them. WebGPU wants 4-byte aligned copies, so unaligned
 * edges are read, patched on the host and written back. Device-to-device copies run a copy kernel
 * (on NVIDIA it outran copyBufferToBuffer: benchmarks/RESULTS.md, tried and not taken).
 *
 * @internal
 */
import type { Buffer, Primitives } from "@effect-gpu/core/Buffer"
import type { BackendError } from "@effect-gpu/core/GpuError"
import { DeviceLost, KernelError } from "@effect-gpu/core/GpuError"
import * as Effect from "effect/Effect"
import type { Context } from "./context.js"
import * as GpuContext from "./context.js"

const STORAGE = () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST

/** @internal: a GPU buffer and the ways to reach it */
export interface Native {
  readonly ctx: Context
  readonly buffer: GPUBuffer
  /** shared buffers take writes through a mapped staging buffer */
  readonly viaStaging: boolean
  /** called when the buffer is freed: programs bound to it let go */
  readonly onRelease: Set<() => void>
}

const natives = new WeakMap<GPUBuffer, Native>()

/** @internal */
export const nativeOf = (b: Buffer): Native | undefined =>
  b.native instanceof Object ? natives.get(b.native as GPUBuffer) : undefined

const promise = <A>(ctx: Context, op: string, f: () => Promise<A>): Effect.Effect<A, BackendError> =>
  Effect.flatMap(
    GpuContext.checkAlive(ctx),
    () =>
      Effect.tryPromise({
        try: f,
        catch: (e) =>
          ctx.lost !== undefined
            ? new DeviceLost({ device: ctx.name, reason: ctx.lost })
            : new KernelError({ op, device: ctx.name, detail: String(e), cause: e })
      })
  )

/**
 * @internal: queues a read of [offset, offset + size) through a staging buffer and returns the wait for its
 * bytes; `queued` runs once the copy is submitted. Work queued after it (a next decoding step) goes to the
 * device while the map is pending.
 */
export const queueRead = (
  ctx: Context,
  src: GPUBuffer,
  offset: number,
  size: number,
  queued?: () => void
): Effect.Effect<Effect.Effect<Uint8Array, BackendError>, BackendError> => {
  if (size === 0) return Effect.succeed(Effect.succeed(new Uint8Array(0)))
  return Effect.flatMap(GpuContext.checkAlive(ctx), () =>
    Effect.sync(() => {
      const lo = Math.floor(offset / 4) * 4
      const hi = Math.ceil((offset + size) / 4) * 4
      const staging = GpuContext.takeReadback(ctx, hi - lo)
      let waiting: Promise<void>
      let serial: number
      try {
        const enc = ctx.device.createCommandEncoder()
        enc.copyBufferToBuffer(src, lo, staging, 0, hi - lo)
        serial = GpuContext.submit(ctx, [enc.finish()])
        waiting = staging.mapAsync(GPUMapMode.READ, 0, hi - lo)
      } catch (e) {
        GpuContext.giveReadback(ctx, staging)
        return promise(ctx, "read", () => Promise.reject(e))
      }
      // the bytes taken once the map resolves, whether or not anybody still waits: the staging buffer goes
      // back to the pool either way
      const bytes = waiting.then(
        () => {
          GpuContext.finished(ctx, serial)
          try {
            return new Uint8Array(staging.getMappedRange(0, hi - lo)).slice(offset - lo, offset - lo + size)
          } finally {
            staging.unmap()
            GpuContext.giveReadback(ctx, staging)
          }
        },
        (e) => {
          GpuContext.giveReadback(ctx, staging)
          throw e
        }
      )
      // handled here too: where nobody waits (or `queued` throws), the map's rejection is not left unawaited
      bytes.catch(() => undefined)
      try {
        queued?.()
      } catch (e) {
        return promise(ctx, "read", () => Promise.reject(e))
      }
      // a validation error or a loss reported while the map was pending fails the read, as a wait does
      return Effect.zipLeft(promise(ctx, "read", () => bytes), GpuContext.checkAlive(ctx))
    }))
}

/** @internal: reads [offset, offset + size) through a staging buffer (`queueRead`, waited for) */
export const read = (
  ctx: Context,
  src: GPUBuffer,
  offset: number,
  size: number,
  queued?: () => void
): Effect.Effect<Uint8Array, BackendError> => Effect.flatten(queueRead(ctx, src, offset, size, queued))

/** @internal: writes bytes, patching unaligned edges through a read of the words they touch */
export const write = (
  ctx: Context,
  dst: GPUBuffer,
  offset: number,
  data: Uint8Array,
  viaStaging: boolean
): Effect.Effect<void, BackendError> => {
  if (data.byteLength === 0) return Effect.void
  if (offset % 4 === 0 && data.byteLength % 4 === 0) {
    return Effect.flatMap(GpuContext.checkAlive(ctx), () =>
      Effect.sync(() => {
        if (viaStaging) {
          // shared path: bytes go straight into a mapped staging buffer; the copy is queued, nothing waits
          const staging = GpuContext.createBuffer(ctx, {
            size: data.byteLength,
            usage: GPUBufferUsage.MAP_WRITE | GPUBufferUsage.COPY_SRC,
            mappedAtCreation: true
          })
          new Uint8Array(staging.getMappedRange()).set(data)
          staging.unmap()
          const enc = ctx.device.createCommandEncoder()
          enc.copyBufferToBuffer(staging, 0, dst, offset, data.byteLength)
          GpuContext.submit(ctx, [enc.finish()])
          GpuContext.destroyBuffer(ctx, staging)
        } else {
          ctx.device.queue.writeBuffer(dst, offset, data as Uint8Array<ArrayBuffer>)
        }
      }))
  }
  const lo = Math.floor(offset / 4) * 4
  const hi = Math.ceil((offset + data.byteLength) / 4) * 4
  return Effect.flatMap(read(ctx, dst, lo, hi - lo), (words) => {
    words.set(data, offset - lo)
    return write(ctx, dst, lo, words, viaStaging)
  })
}

/** @internal */
export const memset = (
  ctx: Context,
  dst: GPUBuffer,
  offset: number,
  size: number,
  value: number
): Effect.Effect<void, BackendError> => {
  if (size === 0) return Effect.void
  const lo = Math.ceil(offset / 4) * 4
  const hi = Math.floor((offset + size) / 4) * 4
  // within a word or two: one read-modify-write
  if (hi <= lo) return write(ctx, dst, offset, new Uint8Array(size).fill(value), false)
  const body = Effect.flatMap(GpuContext.checkAlive(ctx), () =>
    Effect.sync(() => {
      if (value === 0) {
        const enc = ctx.device.createCommandEncoder()
        enc.clearBuffer(dst, lo, hi - lo)
        GpuContext.submit(ctx, [enc.finish()])
      } else {
        const chunk = 1 << 24
        const fill = new Uint8Array(Math.min(chunk, hi - lo)).fill(value)
        for (let o = lo; o < hi; o += chunk) ctx.device.queue.writeBuffer(dst, o, fill, 0, Math.min(chunk, hi - o))
      }
    }))
  const head = lo > offset ? write(ctx, dst, offset, new Uint8Array(lo - offset).fill(value), false) : Effect.void
  const tail = offset + size > hi
    ? write(ctx, dst, hi, new Uint8Array(offset + size - hi).fill(value), false)
    : Effect.void
  return Effect.all([body, head, tail], { discard: true })
}

const COPY_WGSL = `
@group(0) @binding(0) var<storage, read_write> B: array<u32>;
@group(0) @binding(1) var<storage, read_write> D: array<u32>;
struct Params { src: u32, dst: u32, n: u32, pad: u32 }
@group(0) @binding(2) var<uniform> P: Params;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let stride = nwg.x * 256u;
  for (var i = gid.x; i < P.n; i += stride) { D[P.dst + i] = B[P.src + i]; }
}`

/** @internal: a device-side copy by kernel; false when it cannot (other device, unaligned, overlapping) */
export const copy = (
  ctx: Context,
  src: GPUBuffer,
  srcOffset: number,
  dst: GPUBuffer,
  dstOffset: number,
  size: number
): Effect.Effect<boolean, BackendError> => {
  const aligned = srcOffset % 4 === 0 && dstOffset % 4 === 0 && size % 4 === 0
  const align = ctx.limits.minStorageBufferOffsetAlignment
  if (!aligned || (src === dst && srcOffset < dstOffset + size && dstOffset < srcOffset + size)) {
    return Effect.succeed(false)
  }
  if (src === dst) {
    // one buffer: overlapping bindings of it are not allowed, so copy in two steps through a temporary
    return Effect.gen(function*() {
      const tmp = GpuContext.createBuffer(ctx, { size, usage: STORAGE() })
      try {
        yield* copy(ctx, src, srcOffset, tmp, 0, size)
        return yield* copy(ctx, tmp, 0, dst, dstOffset, size)
      } finally {
        GpuContext.destroyBuffer(ctx, tmp)
      }
    })
  }
  return Effect.gen(function*() {
    const pipe = yield* GpuContext.pipeline(ctx, "copy_u32", "cpy", "ww", COPY_WGSL)
    yield* GpuContext.checkAlive(ctx)
    const sLo = Math.floor(srcOffset / align) * align
    const dLo = Math.floor(dstOffset / align) * align
    const uniform = GpuContext.createBuffer(ctx, { size: 256, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST })
    ctx.device.queue.writeBuffer(
      uniform,
      0,
      new Uint32Array([(srcOffset - sLo) / 4, (dstOffset - dLo) / 4, size / 4, 0])
    )
    const group = ctx.device.createBindGroup({
      layout: GpuContext.layout(ctx, "ww").group,
      entries: [
        { binding: 0, resource: { buffer: src, offset: sLo, size: srcOffset - sLo + size } },
        { binding: 1, resource: { buffer: dst, offset: dLo, size: dstOffset - dLo + size } },
        { binding: 2, resource: { buffer: uniform, offset: 0, size: 256 } }
      ]
    })
    const enc = ctx.device.createCommandEncoder()
    const pass = enc.beginComputePass()
    pass.setPipeline(pipe)
    pass.setBindGroup(0, group)
    pass.dispatchWorkgroups(Math.min(Math.ceil(size / 4 / 256), 4096))
    pass.end()
    GpuContext.submit(ctx, [enc.finish()])
    GpuContext.destroyBuffer(ctx, uniform)
    return true
  })
}

/** @internal: allocates a native storage buffer and its primitives; a driver out-of-memory fails it */
export const allocate = (
  ctx: Context,
  size: number,
  kind: "private" | "shared" | "mapped",
  init?: Uint8Array
): Effect.Effect<Primitives, BackendError> =>
  Effect.flatMap(GpuContext.checkAlive(ctx), () =>
    Effect.tryPromise({
      try: async () => {
        ctx.device.pushErrorScope("out-of-memory")
        ctx.device.pushErrorScope("validation")
        const buffer = GpuContext.createBuffer(ctx, {
          size: Math.max(16, Math.ceil(size / 16) * 16),
          usage: STORAGE(),
          mappedAtCreation: init !== undefined,
          label: kind
        })
        const invalid = await ctx.device.popErrorScope()
        const oom = await ctx.device.popErrorScope()
        if (oom !== null || invalid !== null) {
          GpuContext.destroyBuffer(ctx, buffer)
          throw new Error((oom ?? invalid)!.message || "the driver refused the allocation")
        }
        if (init !== undefined) {
          // the host bytes are copied once, straight into the buffer's mapping
          new Uint8Array(buffer.getMappedRange(), 0, init.byteLength).set(init)
          buffer.unmap()
        }
        return buffer
      },
      catch: (e) => new KernelError({ op: "allocate", device: ctx.name, detail: `out of memory: ${e}`, cause: e })
    }).pipe(Effect.map((buffer): Primitives => {
      const viaStaging = kind === "shared"
      const native: Native = { ctx, buffer, viaStaging, onRelease: new Set() }
      natives.set(buffer, native)
      return {
        native: buffer,
        memset: (offset, n, value) => memset(ctx, buffer, offset, n, value),
        write: (offset, data) => write(ctx, buffer, offset, data, viaStaging),
        read: (offset, n) => read(ctx, buffer, offset, n),
        copyFrom: (src, srcOffset, dstOffset, n) => {
          const other = nativeOf(src)
          return other === undefined || other.ctx.device !== ctx.device
            ? Effect.succeed(false)
            : copy(ctx, other.buffer, srcOffset, buffer, dstOffset, n)
        }
      }
    })))

/** @internal */
export const release = (ctx: Context, p: Primitives): Effect.Effect<void> =>
  Effect.sync(() => {
    const buffer = p.native as GPUBuffer
    const native = natives.get(buffer)
    native?.onRelease.forEach((f) => f())
    GpuContext.destroyBuffer(ctx, buffer)
  })
