/**
 * Captured computes (`Backend.captureNext`): what ran, per dispatch, with host and GPU times, and its
 * forms as text: a table for people, JSON for tools.
 *
 * @since 0.1.0
 */

/**
 * One node of a captured compute.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  readonly index: number
  readonly op: string
  readonly name: string
  readonly dtype: string
  readonly ne: ReadonlyArray<number>
  /** the kernel that ran (a pipeline key on GPUs) */
  readonly kernel: string
  /** the kernel's family and compiled-in choices, where the device generates kernels */
  readonly variant?: { readonly [choice: string]: string | number | boolean } | undefined
  /** per binding, whether the kernel reads it only ("r") or writes it too ("w") */
  readonly access?: string | undefined
  /** the kernel's source (WGSL on WebGPU) */
  readonly source?: string | undefined
  /** GPU time where the device can measure it */
  readonly gpuTimeNs?: number | undefined
  /** host time to run (CPU) or encode (GPU) the node */
  readonly hostTimeMs: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Trace {
  readonly device: string
  readonly backend: string
  readonly entries: ReadonlyArray<Entry>
}

/**
 * One line per dispatch: index, op, shape, kernel, GPU time (where measured), host time.
 *
 * @since 0.1.0
 * @category formatting
 */
export const format = (trace: Trace): string => {
  const rows = trace.entries.map((e) => [
    String(e.index),
    e.op,
    `${e.dtype}[${e.ne.join(",")}]`,
    e.kernel.split("|")[0],
    e.gpuTimeNs === undefined ? "-" : (e.gpuTimeNs / 1000).toFixed(1),
    e.hostTimeMs.toFixed(3)
  ])
  const header = ["#", "op", "tensor", "kernel", "gpu us", "host ms"]
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const line = (r: ReadonlyArray<string>) => r.map((c, i) => c.padEnd(widths[i])).join("  ")
  const gpu = trace.entries.reduce((s, e) => s + (e.gpuTimeNs ?? 0), 0)
  return [
    `${trace.device} (${trace.backend}): ${trace.entries.length} dispatches, ${(gpu / 1000).toFixed(1)} us on the GPU`,
    line(header),
    ...rows.map(line)
  ].join("\n")
}

/**
 * The whole trace, WGSL sources included.
 *
 * @since 0.1.0
 * @category formatting
 */
export const toJson = (trace: Trace): string => JSON.stringify(trace, null, 2)

/**
 * The trace as Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one process per trace
 * (the device), a track of host time (running the node on the CPU, encoding it on a GPU) and, where the
 * device measured it, a track of GPU time. Each dispatch is a complete event laid end to end on its track,
 * with its op, tensor, kernel and variant as arguments (the sources stay out: `toJson` has them).
 *
 * @since 0.1.0
 * @category formatting
 */
export const toChromeTrace = (trace: Trace): string => {
  const pid = 1
  const events: Array<Record<string, unknown>> = [
    { ph: "M", pid, name: "process_name", args: { name: `${trace.device} (${trace.backend})` } },
    { ph: "M", pid, tid: 1, name: "thread_name", args: { name: "host" } },
    { ph: "M", pid, tid: 2, name: "thread_name", args: { name: "GPU" } }
  ]
  // microseconds, end to end on each track: the trace records durations, not start times
  let host = 0
  let gpu = 0
  for (const e of trace.entries) {
    const args = {
      index: e.index,
      tensor: `${e.name || "-"} ${e.dtype}[${e.ne.join(", ")}]`,
      kernel: e.kernel,
      ...(e.variant === undefined ? {} : { variant: e.variant })
    }
    const cat = typeof e.variant?.family === "string" ? e.variant.family : e.op
    events.push({ ph: "X", pid, tid: 1, name: e.op, cat, ts: host, dur: e.hostTimeMs * 1000, args })
    host += e.hostTimeMs * 1000
    if (e.gpuTimeNs !== undefined) {
      events.push({ ph: "X", pid, tid: 2, name: e.op, cat, ts: gpu, dur: e.gpuTimeNs / 1000, args })
      gpu += e.gpuTimeNs / 1000
    }
  }
  return JSON.stringify({ traceEvents: events, displayTimeUnit: "ms" })
}
