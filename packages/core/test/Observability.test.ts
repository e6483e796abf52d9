import { Cpu, Graph, Metrics, Ops, Registry, Trace } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Metric, Tracer } from "effect"

/** a tracer that keeps every span it starts: name and attributes */
const recording = () => {
  const spans: Array<{ name: string; attributes: Map<string, unknown> }> = []
  let n = 0
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      spans.push({ name, attributes })
      const id = String(n++)
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: id,
        traceId: "t",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes,
        links,
        sampled: true,
        kind,
        end: () => {},
        attribute: (key, value) => {
          attributes.set(key, value)
        },
        event: () => {},
        addLinks: () => {}
      }
      return span
    },
    context: (f) => f()
  })
  return { spans, layer: Layer.setTracer(tracer) }
}

const cpu = (m: Metric.Metric<any, any, any>) => Metric.tagged(m, "device", "CPU")

describe("observability", () => {
  it.effect("allocate, compute and copies open spans that say the device, the graph, the plan and the bytes", () => {
    const { layer, spans } = recording()
    return Effect.gen(function*() {
      const backend = yield* (yield* Registry.bestDevice).makeBackend()
      const g = Graph.make()
      const a = yield* g.input("a", "f32", [256])
      yield* g.output(Ops.scale(Ops.add(a, a), 0.5))
      const plan = yield* backend.allocate(g)
      yield* plan.set(a, new Float32Array(256).fill(1))
      yield* backend.compute(plan)
      const loc = plan.location(a)!
      yield* backend.setAsync(loc, new Uint8Array(1024))
      yield* backend.synchronize

      const allocate = spans.find((s) => s.name === "Backend.allocate")!
      assert.strictEqual(allocate.attributes.get("device"), "CPU")
      assert.strictEqual(allocate.attributes.get("graph.nodes"), plan.graph.nodes.length)
      assert.strictEqual(allocate.attributes.get("plan.id"), plan.id)
      assert.isAtLeast(allocate.attributes.get("bytes") as number, plan.layout.size)
      const compute = spans.find((s) => s.name === "Backend.compute")!
      assert.deepStrictEqual(
        Object.fromEntries(compute.attributes),
        { device: "CPU", "plan.id": plan.id, "graph.nodes": plan.graph.nodes.length }
      )
      const set = spans.find((s) => s.name === "Backend.setAsync")!
      assert.strictEqual(set.attributes.get("bytes"), 1024)
    }).pipe(Effect.scoped, Effect.provide(Cpu.layer()), Effect.provide(layer))
  })

  it.effect("metrics per device: computes, their latency, bytes allocated and live buffers, back to zero after", () =>
    Effect.gen(function*() {
      const computesBefore = (yield* Metric.value(cpu(Metrics.computes))).count
      const latencyBefore = (yield* Metric.value(cpu(Metrics.computeLatency))).count
      const device = yield* Registry.bestDevice
      yield* Effect.scoped(Effect.gen(function*() {
        const backend = yield* device.makeBackend()
        const g = Graph.make()
        const a = yield* g.input("a", "f32", [1000])
        yield* g.output(Ops.mul(a, a))
        const plan = yield* backend.allocate(g)
        yield* backend.compute(plan)
        yield* backend.compute(plan)
        // the gauges follow the device's ledger
        const held = device.ledger.snapshot()
        assert.isAbove(held.bytes, 0)
        assert.strictEqual((yield* Metric.value(cpu(Metrics.bytesAllocated))).value, held.bytes)
        assert.strictEqual((yield* Metric.value(cpu(Metrics.liveBuffers))).value, held.buffers)
      }))
      assert.strictEqual((yield* Metric.value(cpu(Metrics.computes))).count, computesBefore + 2)
      const latency = yield* Metric.value(cpu(Metrics.computeLatency))
      assert.strictEqual(latency.count, latencyBefore + 2)
      assert.isAbove(latency.sum, 0)
      assert.strictEqual((yield* Metric.value(cpu(Metrics.bytesAllocated))).value, 0)
      assert.strictEqual((yield* Metric.value(cpu(Metrics.liveBuffers))).value, 0)
    }).pipe(Effect.provide(Cpu.layer())))
})

describe("Chrome trace events", () => {
  it.effect("a captured compute as complete events end to end on the host track, with the op and kernel", () =>
    Effect.gen(function*() {
      const backend = yield* (yield* Registry.bestDevice).makeBackend()
      const g = Graph.make()
      const a = yield* g.input("a", "f32", [64, 4])
      yield* g.output(Ops.softMax(Ops.mul(a, a)))
      const plan = yield* backend.allocate(g)
      const capture = yield* backend.captureNext
      yield* backend.compute(plan)
      const trace = yield* capture
      const parsed = JSON.parse(Trace.toChromeTrace(trace)) as {
        traceEvents: Array<{ ph: string; tid?: number; name: string; ts: number; dur: number; args: any }>
      }
      const complete = parsed.traceEvents.filter((e) => e.ph === "X")
      // the CPU measures no GPU time: one host event per entry
      assert.deepStrictEqual(complete.map((e) => e.name), trace.entries.map((e) => e.op))
      assert.isTrue(complete.every((e) => e.tid === 1))
      complete.forEach((e, i) => {
        assert.closeTo(e.dur, trace.entries[i].hostTimeMs * 1000, 1e-9)
        assert.strictEqual(e.args.kernel, trace.entries[i].kernel)
        if (i > 0) assert.closeTo(e.ts, complete[i - 1].ts + complete[i - 1].dur, 1e-6)
      })
      const names = parsed.traceEvents.filter((e) => e.ph === "M").map((e) => e.args.name)
      assert.include(names, "CPU (" + trace.backend + ")")
    }).pipe(Effect.scoped, Effect.provide(Cpu.layer())))

  it("GPU time where measured goes on a track of its own", () => {
    const entry = (index: number, gpuTimeNs: number) => ({
      index,
      op: "mul_mat",
      name: "",
      dtype: "f32",
      ne: [4, 4],
      kernel: "mm|bind",
      variant: { family: "mm" },
      gpuTimeNs,
      hostTimeMs: 0.002
    })
    const trace = { device: "WebGPU0", backend: "WebGPU0", entries: [entry(0, 1500), entry(1, 2500)] }
    const events = JSON.parse(Trace.toChromeTrace(trace)).traceEvents as Array<any>
    const gpu = events.filter((e) => e.ph === "X" && e.tid === 2)
    assert.deepStrictEqual(gpu.map((e) => [e.ts, e.dur, e.cat]), [[0, 1.5, "mm"], [1.5, 2.5, "mm"]])
  })
})
