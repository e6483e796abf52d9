import { Cpu, Metrics } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { DataPointType, MetricReader } from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base"
import { Effect, Metric } from "effect"
import { program, tracing } from "../src/program.js"

/** a reader the test collects from when it asks */
class PullReader extends MetricReader {
  protected onShutdown = () => Promise.resolve()
  protected onForceFlush = () => Promise.resolve()
}

describe("OpenTelemetry", () => {
  it("exports effect-gpu's spans with their attributes, under the program's span", async () => {
    const exporter = new InMemorySpanExporter()
    // read while the SDK is up: its shutdown empties the in-memory exporter
    const [sum, spans] = await Effect.runPromise(
      program.pipe(
        Effect.provide(Cpu.layer()),
        Effect.zip(Effect.sync(() => exporter.getFinishedSpans())),
        Effect.provide(tracing(exporter))
      )
    )
    assert.closeTo(sum, 4, 1e-4)
    const root = spans.find((s) => s.name === "example.softmax")!
    assert.isDefined(root)
    const computes = spans.filter((s) => s.name === "Backend.compute")
    assert.strictEqual(computes.length, 2)
    for (const c of computes) {
      assert.strictEqual(c.attributes["device"], "CPU")
      assert.strictEqual(c.attributes["graph.nodes"], 2)
      assert.strictEqual(c.spanContext().traceId, root.spanContext().traceId)
    }
    const allocate = spans.find((s) => s.name === "Backend.allocate")!
    assert.strictEqual(allocate.attributes["plan.id"], computes[0].attributes["plan.id"])
    assert.isAbove(allocate.attributes["bytes"] as number, 0)
  })

  it("exports effect-gpu's metrics, tagged with the device, through the same SDK", async () => {
    const reader = new PullReader()
    const computes = Metric.value(Metric.tagged(Metrics.computes, "device", "CPU"))
    const [before, collected, after] = await Effect.runPromise(
      Effect.all([
        computes,
        program.pipe(Effect.provide(Cpu.layer()), Effect.zipRight(Effect.promise(() => reader.collect()))),
        computes
      ]).pipe(Effect.provide(tracing(new InMemorySpanExporter(), reader)))
    )
    assert.strictEqual(after.count - before.count, 2)
    const metrics = collected.resourceMetrics.scopeMetrics.flatMap((s) => s.metrics)
    const named = (name: string) => {
      const m = metrics.find((m) => m.descriptor.name === name)
      assert.isDefined(m, `${name} among ${metrics.map((m) => m.descriptor.name).join(", ")}`)
      return m!
    }
    const onCpu = (name: string) => named(name).dataPoints.filter((p) => p.attributes["device"] === "CPU")
    // what Effect's registry holds (this process's computes so far), as OpenTelemetry's data points
    assert.deepStrictEqual(onCpu("effect_gpu_computes").map((p) => p.value), [after.count])
    const latency = named("effect_gpu_compute_latency_ms")
    assert.strictEqual(latency.dataPointType, DataPointType.HISTOGRAM)
    assert.deepInclude(onCpu("effect_gpu_compute_latency_ms")[0].value, { count: after.count })
    // the program's scope closed before the read: its buffers are gone
    assert.deepStrictEqual(onCpu("effect_gpu_live_buffers").map((p) => p.value), [0])
  })
})
