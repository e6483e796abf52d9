/**
 * The WebGPU kernel layer: carries out the command algebra on one GPUDevice. Computes replay a program
 * cached per plan, split into command buffers of about CHUNK_MS of GPU work each (estimated from each
 * dispatch's cost and a pace the device learns from finished command buffers) and of at most `chunk`
 * dispatches, the first ones shorter so the GPU starts early, with about 2 x CHUNK_MS of work in flight at
 * most: an abort (interruption) waits for that much at most. A program computed again (a decoding step)
 * has its next compute's command buffers encoded while the GPU runs the current one.
 *
 * @internal
 */
import type { Interpreter } from "@effect-gpu/core/Command"
import type { BackendError } from "@effect-gpu/core/GpuError"
import { KernelError } from "@effect-gpu/core/GpuError"
import * as Op from "@effect-gpu/core/Op"
import type { Plan } from "@effect-gpu/core/Plan"
import type { Entry as TraceEntry, Trace } from "@effect-gpu/core/Trace"
import * as Effect from "effect/Effect"
import type { Context } from "./context.js"
import * as GpuContext from "./context.js"
import * as Memory from "./memory.js"
import { nativeOf } from "./memory.js"
import * as Program from "./program.js"

/** @internal */
export interface Options {
  /** dispatches per command buffer at most */
  readonly chunk?: number
}

/**
 * a program's next compute being encoded ahead, a piece at a time between the host's other work: its
 * command buffers' ranges, those finished, and the one open (its pass and next dispatch)
 */
interface Preparing {
  readonly ranges: ReadonlyArray<readonly [number, number]>
  readonly buffers: Array<GPUCommandBuffer>
  open: { readonly encoder: GPUCommandEncoder; readonly pass: GPUComputePassEncoder; next: number } | undefined
  pending: (() => void) | undefined
}

/**
 * dispatches encoded ahead between two looks at the event loop: encoding a whole step in one go kept the
 * step's own logits waiting behind it
 */
const PIECE = 16

/** tasks waiting for the message that runs them (browsers), oldest first; a cancelled one is a no-op */
const queued: Array<{ f: (() => void) | undefined }> = []
let channel: MessageChannel | undefined

/** runs f after the event loop's pending callbacks (a GPU completion among them); returns its cancel */
const later = (f: () => void): () => void => {
  if (typeof setImmediate === "function") {
    const handle = setImmediate(f)
    return () => clearImmediate(handle)
  }
  if (typeof MessageChannel === "function") {
    // browsers: a message runs as the next task, where setTimeout(0) waits 4 ms once nested; one channel
    if (channel === undefined) {
      channel = new MessageChannel()
      channel.port1.onmessage = () => queued.shift()?.f?.()
    }
    const task: { f: (() => void) | undefined } = { f }
    queued.push(task)
    channel.port2.postMessage(undefined)
    return () => {
      task.f = undefined
    }
  }
  const handle = setTimeout(f, 0)
  return () => clearTimeout(handle)
}

/** GPU time one command buffer should take: an abort waits for about twice this at most */
const CHUNK_MS = 25
/** dispatches in a compute's first command buffer (each next one twice as many, up to `chunk`) */
const FIRST_CHUNK = 8

/** waits for a promise of the device, then for the device to be alive and without a new error */
const await_ = (ctx: Context, p: Promise<unknown>): Effect.Effect<void, BackendError> =>
  Effect.async<void, BackendError>((resume) => {
    p.then(
      () => {
        const dead = GpuContext.deadOrFailed(ctx)
        resume(dead === undefined ? Effect.void : Effect.fail(dead))
      },
      (e) => resume(Effect.fail(new KernelError({ op: "submit", device: ctx.name, detail: String(e), cause: e })))
    )
  })

/** @internal */
export const make = (ctx: Context, options?: Options): Interpreter => {
  const programs = new WeakMap<Plan, Program.Program>()
  const chunkLimit = options?.chunk ?? 128
  /**
   * each program's own pace: wall ns per unit of cost over its last whole compute. The device's pace, learned
   * from whatever ran (a prompt's products, counted in flops), put a decoding step's weight reads (counted in
   * bytes) at 100x their time, and the step then waited on its command buffers one by one
   */
  const paces = new WeakMap<Program.Program, number>()
  const paceOf = (program: Program.Program) => paces.get(program) ?? ctx.pace.nsPerCost
  /**
   * command buffers encoded for a program's next compute while the GPU runs its current one: a program
   * computed again and again (a decoding step) then only submits. Encoding is independent of the data
   * (inputs are queue writes before the submit); a program's buffers are dropped with it
   */
  const preparing = new Map<Program.Program, Preparing>()
  /** computes of each program so far: the second and later prepare the next */
  const computes = new WeakMap<Program.Program, number>()

  const programFor = (plan: Plan) =>
    Effect.suspend(() => {
      const cached = programs.get(plan)
      if (cached !== undefined) return Effect.succeed(cached)
      return Effect.map(
        Program.build(ctx, plan, (t) => {
          const loc = plan.location(t)
          const native = loc === undefined ? undefined : nativeOf(loc.buffer)
          return native === undefined || native.ctx !== ctx ? undefined : { buffer: native.buffer, offset: loc!.offset }
        }),
        (program) => {
          programs.set(plan, program)
          // the program lives as long as the memory it binds
          const forget = () => {
            preparing.get(program)?.pending?.()
            preparing.delete(program)
            program.release()
            programs.delete(plan)
          }
          for (const t of [...plan.graph.nodes, ...plan.graph.leafs]) {
            const loc = plan.location(t)
            if (loc !== undefined) nativeOf(loc.buffer)?.onRelease.add(forget)
          }
          return program
        }
      )
    })

  const timed = (program: Program.Program): Effect.Effect<Array<TraceEntry>, BackendError> =>
    Effect.gen(function*() {
      const n = program.dispatches.length
      const stamps = ctx.features.has("timestamp-query") && n > 0
      const querySet = stamps ? ctx.device.createQuerySet({ type: "timestamp", count: 2 * n }) : undefined
      const resolve = stamps
        ? GpuContext.createBuffer(ctx, { size: 16 * n, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC })
        : undefined
      const readback = stamps
        ? GpuContext.createBuffer(ctx, { size: 16 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })
        : undefined
      const host: Array<number> = []
      const enc = ctx.device.createCommandEncoder()
      program.dispatches.forEach((d, i) => {
        const t0 = performance.now()
        const pass = enc.beginComputePass(
          querySet
            ? { timestampWrites: { querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } }
            : {}
        )
        pass.setPipeline(d.pipeline)
        pass.setBindGroup(0, d.bindGroup)
        pass.dispatchWorkgroups(...d.workgroups)
        pass.end()
        host.push(performance.now() - t0)
      })
      if (querySet && resolve && readback) {
        enc.resolveQuerySet(querySet, 0, 2 * n, resolve, 0)
        enc.copyBufferToBuffer(resolve, 0, readback, 0, 16 * n)
      }
      const serial = GpuContext.submit(ctx, [enc.finish()])
      let gpu: Array<number | undefined> = program.dispatches.map(() => undefined)
      if (readback) {
        yield* await_(ctx, readback.mapAsync(GPUMapMode.READ))
        GpuContext.finished(ctx, serial)
        const ticks = new BigInt64Array(readback.getMappedRange().slice(0))
        gpu = program.dispatches.map((_, i) => Number(ticks[2 * i + 1] - ticks[2 * i]))
        GpuContext.destroyBuffer(ctx, readback)
        GpuContext.destroyBuffer(ctx, resolve!)
        querySet!.destroy()
      } else {
        yield* await_(ctx, ctx.device.queue.onSubmittedWorkDone())
        GpuContext.finished(ctx, serial)
      }
      return program.dispatches.map((d, i): TraceEntry => ({
        index: i,
        op: Op.name(d.node.op),
        name: d.node.name,
        dtype: d.node.dtype,
        ne: [...d.node.ne],
        kernel: d.key,
        variant: d.variant,
        access: d.access,
        source: ctx.sources.get(d.key),
        gpuTimeNs: gpu[i],
        hostTimeMs: host[i]
      }))
    })

  /** encodes dispatches [start, end) in one compute pass */
  const encode = (program: Program.Program, start: number, end: number): GPUCommandBuffer => {
    const enc = ctx.device.createCommandEncoder()
    const pass = enc.beginComputePass()
    for (let k = start; k < end; k++) {
      const d = program.dispatches[k]
      pass.setPipeline(d.pipeline)
      pass.setBindGroup(0, d.bindGroup)
      pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2])
    }
    pass.end()
    return enc.finish()
  }

  /** encodes up to `count` more dispatches of a program's next compute; true once all are */
  const encodeAhead = (program: Program.Program, state: Preparing, count: number): boolean => {
    while (count > 0 && state.buffers.length < state.ranges.length) {
      const [start, end] = state.ranges[state.buffers.length]
      if (state.open === undefined) {
        const encoder = ctx.device.createCommandEncoder()
        state.open = { encoder, pass: encoder.beginComputePass(), next: start }
      }
      const open = state.open
      const stop = Math.min(end, open.next + count)
      for (let k = open.next; k < stop; k++) {
        const d = program.dispatches[k]
        open.pass.setPipeline(d.pipeline)
        open.pass.setBindGroup(0, d.bindGroup)
        open.pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2])
      }
      count -= stop - open.next
      open.next = stop
      if (stop === end) {
        open.pass.end()
        state.buffers.push(open.encoder.finish())
        state.open = undefined
      }
    }
    return state.buffers.length === state.ranges.length
  }

  /** starts encoding a program's next compute, a piece per turn of the event loop */
  const prepare = (program: Program.Program) => {
    const state: Preparing = { ranges: split(program, undefined), buffers: [], open: undefined, pending: undefined }
    const step = () => {
      state.pending = undefined
      if (preparing.get(program) === state && !encodeAhead(program, state, PIECE)) state.pending = later(step)
    }
    preparing.set(program, state)
    state.pending = later(step)
  }

  /**
   * every program's next compute encoded now, not a piece a turn: once a step's read is queued, the host
   * has nothing else to do until the GPU is done, and pieces shared their turns with Dawn's event polling
   * (a 1B step's were still unfinished when the step ended; on lavapipe, whose polls wait on its busy
   * queue, half of them never ran)
   */
  const finishPreparing = () => {
    for (const [program, state] of preparing) {
      state.pending?.()
      state.pending = undefined
      encodeAhead(program, state, program.dispatches.length)
    }
  }

  /** a program's command buffers encoded ahead, what was left of them encoded now; undefined if none */
  const takePrepared = (program: Program.Program): Preparing | undefined => {
    const state = preparing.get(program)
    if (state === undefined) return undefined
    preparing.delete(program)
    state.pending?.()
    encodeAhead(program, state, program.dispatches.length)
    return state
  }

  /** the cost of dispatches [start, end) */
  const costOf = (program: Program.Program, start: number, end: number) => {
    let cost = 0
    for (let k = start; k < end; k++) cost += program.dispatches[k].cost
    return cost
  }

  /** a program's whole cost, summed once: each compute of it reads it twice (its pace, its tracking) */
  const totals = new WeakMap<Program.Program, number>()
  const totalOf = (program: Program.Program) => {
    let total = totals.get(program)
    if (total === undefined) {
      total = costOf(program, 0, program.dispatches.length)
      totals.set(program, total)
    }
    return total
  }

  /** the command buffers of a compute: [start, end) of the program's dispatches each */
  const split = (program: Program.Program, commandBuffers: number | undefined): Array<readonly [number, number]> => {
    const n = program.dispatches.length
    const ranges: Array<readonly [number, number]> = []
    if (commandBuffers !== undefined && commandBuffers > 1) {
      // the split asked for (ggml's n_cb)
      const per = Math.max(1, Math.ceil(n / Math.floor(commandBuffers)))
      for (let start = 0; start < n; start += per) ranges.push([start, Math.min(n, start + per)])
      return ranges
    }
    const budget = (CHUNK_MS * 1e6) / paceOf(program)
    let start = 0
    let cost = 0
    // the first command buffers short, then twice as long each: the GPU starts after FIRST_CHUNK dispatches
    // are encoded instead of chunkLimit, and the encoding of each stays ahead of the GPU's work on the one
    // before (otherwise the GPU idles while a step's first hundred dispatches are encoded)
    let limit = Math.min(FIRST_CHUNK, chunkLimit)
    for (let k = 0; k < n; k++) {
      cost += program.dispatches[k].cost
      if (k + 1 - start >= limit || cost >= budget || k + 1 === n) {
        ranges.push([start, k + 1])
        start = k + 1
        cost = 0
        limit = Math.min(2 * limit, chunkLimit)
      }
    }
    return ranges
  }

  /**
   * submits dispatches [start, end) and returns a promise of their completion, which also teaches the
   * device's pace: the time from the later of their submission and the previous completion, over their cost
   */
  const submit = (
    program: Program.Program,
    start: number,
    end: number,
    cost: number,
    encoded?: GPUCommandBuffer | ReadonlyArray<GPUCommandBuffer>,
    submittedAt = performance.now()
  ): Promise<void> => {
    const buffers = encoded === undefined ? [encode(program, start, end)] : Array.isArray(encoded) ? encoded : [encoded]
    const serial = GpuContext.submit(ctx, buffers)
    return ctx.device.queue.onSubmittedWorkDone().then(() => {
      const now = performance.now()
      GpuContext.finished(ctx, serial)
      GpuContext.learnPace(ctx, cost, now - Math.max(submittedAt, ctx.pace.lastDoneAt))
      ctx.pace.lastDoneAt = now
    })
  }

  /**
   * a compute: its command buffers submitted in turn, a bounded amount in flight; a compute returns once
   * its results are ready, a computeAsync once all is submitted; an abort stops submitting and waits for
   * what is in flight
   */
  const run = (
    program: Program.Program,
    command: {
      readonly abort: { readonly aborted: boolean }
      readonly wait: boolean
      readonly options: { readonly commandBuffers?: number }
    }
  ): Effect.Effect<void, BackendError> => {
    // the device's own split (not one asked for): command buffers encoded by the compute before, if any
    const ownSplit = command.options.commandBuffers === undefined
    const ready = ownSplit ? takePrepared(program) : undefined
    const ranges = ready?.ranges ?? split(program, command.options.commandBuffers)
    const count = (computes.get(program) ?? 0) + 1
    computes.set(program, count)
    /**
     * once every command buffer is submitted: the next compute's encoded while the GPU works on these, after
     * what the caller queues next (the logits' read)
     */
    const prepareNext = () => {
      if (ownSplit && count >= 2 && !command.abort.aborted) prepare(program)
    }
    const startedAt = performance.now()
    /** the program's pace learned once its last command buffer is done, where nothing was left out */
    const learn = (done: Promise<void>) => {
      done.then(() => {
        if (command.abort.aborted) return
        const cost = totalOf(program)
        if (cost > 0) paces.set(program, ((performance.now() - startedAt) * 1e6) / cost)
      }, () => {})
      return done
    }
    // one command buffer (the common case), or a compute encoded ahead while the GPU still works on what
    // came before (a decoding step ahead of its token): one submit and no generator. The latter's command
    // buffers each paid a submit's fixed host cost in Dawn (RESULTS.md, "where the time goes"), and with
    // work queued the GPU waits for none of them
    const oneSubmit = ranges.length === 1 ||
      (ready !== undefined && !GpuContext.idle(ctx) && (totalOf(program) * paceOf(program)) / 1e6 <= 2 * CHUNK_MS)
    if (oneSubmit) {
      if (command.abort.aborted) return GpuContext.checkAlive(ctx)
      const done = learn(submit(program, 0, program.dispatches.length, totalOf(program), ready?.buffers))
      prepareNext()
      return command.wait ? await_(ctx, done) : GpuContext.checkAlive(ctx)
    }
    return Effect.gen(function*() {
      // command buffers in flight, oldest first, with their estimated GPU time: up to 2 x CHUNK_MS of work
      // in flight keeps the GPU busy while an abort waits for little
      const inFlight: Array<{ readonly done: Promise<void>; readonly ms: number }> = []
      let inFlightMs = 0
      // where the whole compute fits what may be in flight (a decoding step), nothing waits on its command
      // buffers but the last: the others go without a completion of their own (each cost a promise, a
      // callback and a turn of the event loop, a few times a token)
      const untracked = (totalOf(program) * paceOf(program)) / 1e6 <= 2 * CHUNK_MS
      // the untracked buffers' cost and first submission, learned with the last one's completion
      let skipped = { cost: 0, at: 0 }
      for (const [i, [start, end]] of ranges.entries()) {
        if (command.abort.aborted) break
        const cost = costOf(program, start, end)
        const ms = (cost * paceOf(program)) / 1e6
        const last = end === program.dispatches.length
        if (untracked && !last) {
          if (skipped.cost === 0) skipped = { cost: 0, at: performance.now() }
          GpuContext.submit(ctx, [ready?.buffers[i] ?? encode(program, start, end)])
          skipped.cost += cost
          continue
        }
        const done = skipped.cost > 0
          ? submit(program, start, end, cost + skipped.cost, ready?.buffers[i], skipped.at)
          : submit(program, start, end, cost, ready?.buffers[i])
        inFlight.push({ done: last ? learn(done) : done, ms })
        inFlightMs += ms
        while (inFlight.length > 1 && inFlightMs > 2 * CHUNK_MS) {
          const oldest = inFlight.shift()!
          inFlightMs -= oldest.ms
          yield* await_(ctx, oldest.done)
        }
      }
      prepareNext()
      const last = inFlight.at(-1)
      if (command.abort.aborted && untracked) {
        // stopped before the tracked last buffer: what went in flight has no completion of its own
        const serial = ctx.queue.submitted
        yield* await_(ctx, ctx.device.queue.onSubmittedWorkDone())
        GpuContext.finished(ctx, serial)
      } else if (last !== undefined && (command.wait || command.abort.aborted)) yield* await_(ctx, last.done)
      yield* GpuContext.checkAlive(ctx)
    })
  }

  return {
    device: ctx.name,
    fence: Effect.suspend(() => {
      const dead = GpuContext.deadOrFailed(ctx)
      if (dead !== undefined) return Effect.fail(dead)
      // every submission seen finished already (a step whose logits were read): no round trip
      if (GpuContext.idle(ctx)) return Effect.void
      const serial = ctx.queue.submitted
      return Effect.tap(await_(ctx, ctx.device.queue.onSubmittedWorkDone()), () => GpuContext.finished(ctx, serial))
    }),
    queueRead: (command) => {
      const src = nativeOf(command.buffer)
      return src?.ctx === ctx
        ? Memory.queueRead(ctx, src.buffer, command.offset, command.size, finishPreparing)
        : Effect.map(command.buffer.get(command.offset, command.size), Effect.succeed)
    },
    execute: (command) => {
      switch (command._tag) {
        // bytes go straight to the device memory: the backend has checked the ranges already
        case "SetTensor": {
          const dst = nativeOf(command.buffer)
          return dst?.ctx === ctx
            ? Memory.write(ctx, dst.buffer, command.offset, command.data, dst.viaStaging)
            : command.buffer.set(command.offset, command.data)
        }
        case "GetTensor": {
          const src = nativeOf(command.buffer)
          return src?.ctx === ctx
            ? Memory.read(ctx, src.buffer, command.offset, command.size, finishPreparing)
            : command.buffer.get(command.offset, command.size)
        }
        case "Memset": {
          const dst = nativeOf(command.buffer)
          return dst?.ctx === ctx
            ? Memory.memset(ctx, dst.buffer, command.offset, command.size, command.value & 0xff)
            : command.buffer.memset(command.offset, command.size, command.value)
        }
        case "CopyTensor": {
          const [src, dst] = [nativeOf(command.src), nativeOf(command.dst)]
          // buffers of this GPUDevice (this device's, or a virtual device's sharing it) copy on the GPU
          if (src?.ctx.device !== ctx.device || dst?.ctx.device !== ctx.device || command.size === 0) {
            return command.dst.copyFrom(command.src, command.srcOffset, command.dstOffset, command.size)
          }
          const { dstOffset, size, srcOffset } = command
          // a kernel copy where it can; overlapping or unaligned ranges carry their bytes through the host
          return Effect.flatMap(
            Memory.copy(ctx, src.buffer, srcOffset, dst.buffer, dstOffset, size),
            (done) =>
              done
                ? Effect.void
                : Effect.flatMap(
                  Memory.read(ctx, src.buffer, srcOffset, size),
                  (bytes) => Memory.write(ctx, dst.buffer, dstOffset, bytes, dst.viaStaging)
                )
          )
        }
        case "Compute": {
          const cached = programs.get(command.plan)
          if (cached !== undefined && !command.capture) {
            // the common case, a plan compiled before: checks, encoding and submission
            return Effect.suspend(() => {
              const dead = GpuContext.deadOrFailed(ctx)
              return dead !== undefined ? Effect.fail(dead) : run(cached, command)
            })
          }
          return Effect.gen(function*() {
            yield* GpuContext.checkAlive(ctx)
            const program = yield* programFor(command.plan)
            if (command.capture) {
              const entries = yield* timed(program)
              const trace: Trace = { device: ctx.name, backend: ctx.name, entries }
              return trace
            }
            yield* run(program, command)
          })
        }
      }
    }
  }
}
