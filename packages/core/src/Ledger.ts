/**
 * A device's account of what it holds: live buffers and their bytes, events and backends, and the
 * memory budget allocations are checked against. Leak checks read it; allocation failures quote it.
 *
 * @since 0.1.0
 */
import * as Metrics from "./Metrics.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Snapshot {
  readonly buffers: number
  readonly bytes: number
  readonly events: number
  readonly backends: number
  readonly totalMemory: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Ledger {
  readonly totalMemory: number
  readonly snapshot: () => Snapshot
  /** reserves bytes for a buffer; false when over the budget */
  readonly reserve: (bytes: number) => boolean
  readonly release: (bytes: number) => void
  readonly addEvent: (n: 1 | -1) => void
  readonly addBackend: (n: 1 | -1) => void
  readonly free: () => number
}

/**
 * A ledger with a budget of `totalMemory` bytes; with `device`, every allocation and release updates that
 * device's memory metrics (`Metrics.bytesAllocated`, `Metrics.liveBuffers`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (totalMemory: number, device?: string): Ledger => {
  let buffers = 0
  let bytes = 0
  let events = 0
  let backends = 0
  return {
    totalMemory,
    snapshot: () => ({ buffers, bytes, events, backends, totalMemory }),
    reserve: (n) => {
      if (bytes + n > totalMemory) return false
      bytes += n
      buffers++
      if (device !== undefined) Metrics.recordMemory(device, bytes, buffers)
      return true
    },
    release: (n) => {
      bytes -= n
      buffers--
      if (device !== undefined) Metrics.recordMemory(device, bytes, buffers)
    },
    addEvent: (n) => {
      events += n
    },
    addBackend: (n) => {
      backends += n
    },
    free: () => totalMemory - bytes
  }
}

/**
 * Nothing is held.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isEmpty = (s: Snapshot): boolean => s.buffers === 0 && s.bytes === 0 && s.events === 0 && s.backends === 0
