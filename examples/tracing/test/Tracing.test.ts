import { Cpu } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base"
import { Effect } from "effect"
import { program, tracing } from "../src/program.js"

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
})
