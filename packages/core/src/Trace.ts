/**
 * Captured computes (`Backend.captureNext`) as text: a table for people, JSON for tools.
 *
 * @since 0.1.0
 */
import type { Trace } from "./Command.js"

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
