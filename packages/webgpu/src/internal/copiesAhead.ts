/**
 * A prompt's weight copies moved into the dispatches before their products (KernelTarget.copiesAhead): a
 * quantized product's half_copy dispatch goes, its workgroups riding along with the nearest product or
 * prompt attention before it (sideJob.ts), so that the copy's pass at memory bandwidth runs beside work on
 * the tensor cores. A copy moves back past a dispatch only where that dispatch's bindings stay clear of the
 * copy's destination: a tensor whose memory the destination reuses dies at its last reader, so none of the
 * dispatches the copy now runs beside or before reads or writes what it writes.
 *
 * @internal
 */
import * as Tensor from "@effect-gpu/core/Tensor"
import type { Kernel, KernelTarget } from "./kernels/kernel.js"
import { copyJob } from "./kernels/matmul.js"
import * as SideJob from "./kernels/sideJob.js"

/** how many dispatches back a copy looks for a host */
const LOOKBACK = 12

/** @internal: a prepared dispatch as this pass sees it: its node, kernel and the memory of its bindings */
export interface Placed {
  readonly node: Tensor.Tensor
  readonly kernel: Kernel
  readonly bound: ReadonlyArray<{ readonly buffer: unknown; readonly start: number; readonly end: number }>
}

/** @internal: where a kernel's operands lie: the binding slot of each, in the kernel's order */
export type Slots = (kernel: Kernel) => ReadonlyArray<number>

/** @internal: where a tensor lies: its buffer and byte offset */
export type Locate = (t: Tensor.Tensor) => { readonly buffer: unknown; readonly offset: number } | undefined

/**
 * @internal: `list` with each half_copy dispatch moved into a host before it where one takes it: each
 * candidate (nearest first, LOOKBACK at most, past moved copies) must stay clear of the copy's destination,
 * be of a HOSTS family not yet hosting, and bind the combined kernel with the copy's operands in bindings of
 * their own (`prepare` throws, or falls back to the host alone, where it cannot)
 */
export const carryCopies = <P extends Placed>(
  list: ReadonlyArray<P>,
  target: KernelTarget,
  prepare: (node: Tensor.Tensor, kernel: Kernel) => P,
  slots: Slots,
  locate: Locate
): Array<P> => {
  const out = [...list]
  const moved = new Set<number>()
  const hosting = new Set<number>()
  for (let c = 0; c < out.length; c++) {
    const copy = out[c]
    if (copy.kernel.variant.family !== "half_copy") continue
    const d = copy.kernel.operands.find((o) => o.name === "d")
    const home = d === undefined ? undefined : locate(d.within?.tensor ?? d.tensor)
    if (d === undefined || home === undefined) continue
    const start = home.offset + (d.within?.at ?? 0)
    const end = start + (d.extent ?? Tensor.nbytes(d.tensor))
    const clear = (p: P) => p.bound.every((b) => b.buffer !== home.buffer || b.end <= start || end <= b.start)
    for (let h = c - 1; h >= Math.max(0, c - LOOKBACK); h--) {
      if (moved.has(h)) continue
      const host = out[h]
      if (!clear(host)) break
      const size = SideJob.workgroupSize(host.kernel)
      if (hosting.has(h) || !SideJob.HOSTS.has(String(host.kernel.variant.family)) || size === undefined) continue
      const job = copyJob(copy.node, target, size, d.within)
      const both = job === undefined
        ? undefined
        : SideJob.withSideJob(host.kernel, job, target.workgroupStorage ?? 16384)
      if (both === undefined) continue
      try {
        const p = prepare(host.node, both)
        // the job's two operands (the last) each in a binding of its own
        const at = slots(p.kernel)
        const own = at.slice(-2).every((s) => at.indexOf(s) === at.lastIndexOf(s))
        if (p.kernel.variant.side === undefined || !own) continue
        out[h] = p
        moved.add(c)
        hosting.add(h)
        break
      } catch {
        // the host as it was
      }
    }
  }
  return out.filter((_, i) => !moved.has(i))
}
