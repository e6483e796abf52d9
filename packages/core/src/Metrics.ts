/**
 * The backends' metrics (effect `Metric`), each tagged with its device (`device`): computes finished,
 * their latency, the bytes of device memory allocated and the live buffers. Read them with
 * `Metric.value(Metric.tagged(Metrics.computes, "device", name))`, or export them with any metrics
 * layer (e.g. @effect/opentelemetry's).
 *
 * @since 0.1.0
 */
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricLabel from "effect/MetricLabel"

/**
 * Graph computes that finished (`Backend.compute`), per device.
 *
 * @since 0.1.0
 * @category metrics
 */
export const computes: Metric.Metric.Counter<number> = Metric.counter("effect_gpu_computes", {
  description: "graph computes finished",
  incremental: true
})

/**
 * Milliseconds from a compute's start to its results being ready, per device: 10 us to ~80 s.
 *
 * @since 0.1.0
 * @category metrics
 */
export const computeLatency: Metric.Metric.Histogram<number> = Metric.histogram(
  "effect_gpu_compute_latency_ms",
  MetricBoundaries.exponential({ start: 0.01, factor: 2, count: 24 }),
  "milliseconds from a compute's start to its results"
)

/**
 * Bytes of memory held by a device's buffers now.
 *
 * @since 0.1.0
 * @category metrics
 */
export const bytesAllocated: Metric.Metric.Gauge<number> = Metric.gauge("effect_gpu_bytes_allocated", {
  description: "bytes of memory held by the device's buffers"
})

/**
 * A device's buffers alive now.
 *
 * @since 0.1.0
 * @category metrics
 */
export const liveBuffers: Metric.Metric.Gauge<number> = Metric.gauge("effect_gpu_live_buffers", {
  description: "buffers alive on the device"
})

/** the tag of a device's series */
const deviceTags = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()
const tagsOf = (device: string) => {
  let tags = deviceTags.get(device)
  if (tags === undefined) deviceTags.set(device, tags = [MetricLabel.make("device", device)])
  return tags
}

/**
 * @internal: records a finished compute (synchronously: it runs on the per-token path)
 */
export const recordCompute = (device: string, ms: number): void => {
  const tags = tagsOf(device)
  computes.unsafeUpdate(1, tags)
  computeLatency.unsafeUpdate(ms, tags)
}

/** @internal: records a device's memory after an allocation or a release */
export const recordMemory = (device: string, bytes: number, buffers: number): void => {
  const tags = tagsOf(device)
  bytesAllocated.unsafeUpdate(bytes, tags)
  liveBuffers.unsafeUpdate(buffers, tags)
}
