/**
 * A traced program and the OpenTelemetry wiring that exports its spans: effect-gpu's spans (allocate,
 * compute, copies, with the device, the graph, the plan and the bytes) under the program's own; and,
 * given a metric reader, effect-gpu's metrics (`Metrics`: computes, their latency, memory) with them.
 */
import { Graph, Ops, Registry } from "@effect-gpu/core"
import { NodeSdk } from "@effect/opentelemetry"
import type { MetricReader } from "@opentelemetry/sdk-metrics"
import type { SpanExporter } from "@opentelemetry/sdk-trace-base"
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect } from "effect"

/** softmax(a * a) of 4 rows of 1024, computed twice on the best device */
export const program = Effect.gen(function*() {
  const device = yield* Registry.bestDevice
  const backend = yield* device.makeBackend()
  const g = Graph.make()
  const a = yield* g.input("a", "f32", [1024, 4])
  const y = yield* g.output(Ops.softMax(Ops.mul(a, a)))
  const plan = yield* backend.allocate(g)
  yield* plan.set(a, Array.from({ length: 4096 }, (_, i) => Math.sin(i)))
  yield* backend.compute(plan)
  yield* backend.compute(plan)
  return Array.from(yield* plan.get(y)).reduce((s, v) => s + v, 0) // 4: each row sums to 1
}).pipe(Effect.scoped, Effect.withSpan("example.softmax"))

/** OpenTelemetry's SDK for Node, exporting each span as it ends, and Effect's metrics through `metrics` */
export const tracing = (exporter: SpanExporter, metrics?: MetricReader) =>
  NodeSdk.layer(() => ({
    resource: { serviceName: "effect-gpu-example" },
    spanProcessor: new SimpleSpanProcessor(exporter),
    ...(metrics !== undefined ? { metricReader: metrics } : {})
  }))
