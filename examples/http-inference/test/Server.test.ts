import type { Registry } from "@effect-gpu/core"
import { Cpu, GpuError } from "@effect-gpu/core"
import { TestGpu } from "@effect-gpu/testing"
import { HttpBody, HttpClient } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Inference from "../src/Inference.js"
import * as Mlp from "../src/Mlp.js"
import * as Server from "../src/Server.js"

const serve = <E>(devices: Layer.Layer<Registry.Registry, E>) =>
  Server.app.pipe(Layer.provide(Inference.layer(devices)), Layer.provideMerge(NodeHttpServer.layerTest))

const post = (body: unknown) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const res = yield* client.post("/infer", { body: HttpBody.unsafeJson(body) })
    return { status: res.status, json: (yield* res.json) as Record<string, unknown> }
  })

const rows = (n: number, seed: number) =>
  Array.from({ length: n }, (_, j) => Array.from({ length: Mlp.INPUT }, (_, i) => Math.sin(seed + 7 * j + i)))

/** the model in plain JS, to check the service's answers */
const expected = (input: ReadonlyArray<ReadonlyArray<number>>) => {
  const w = Mlp.weights()
  const gelu = (x: number) => 0.5 * x * (1 + Math.tanh(0.7978845608028654 * x * (1 + 0.044715 * x * x)))
  return input.map((x) => {
    const h = Array.from(
      { length: Mlp.HIDDEN },
      (_, i) => gelu(x.reduce((s, v, k) => s + v * w.w1[i * Mlp.INPUT + k], w.b1[i]))
    )
    const z = Array.from(
      { length: Mlp.CLASSES },
      (_, c) => h.reduce((s, v, k) => s + v * w.w2[c * Mlp.HIDDEN + k], w.b2[c])
    )
    const m = Math.max(...z)
    const e = z.map((v) => Math.exp(v - m))
    const s = e.reduce((a, b) => a + b, 0)
    return e.map((v) => v / s)
  })
}

/** a mock whose computes take 20 ms of real time (the test runs on the live clock); its counters are shared by
 * every build of the layer value, the service's and the test's */
const slowGpu = TestGpu.layer({ latency: "20 millis" })

describe("http-inference", () => {
  it.scoped("answers class probabilities that match the model", () =>
    Effect.gen(function*() {
      const input = rows(5, 1)
      const { json, status } = yield* post({ inputs: input })
      assert.strictEqual(status, 200, JSON.stringify(json))
      assert.strictEqual(json.device, "Test0")
      const probs = json.probabilities as Array<Array<number>>
      const want = expected(input)
      probs.forEach((p, j) => p.forEach((v, c) => assert.closeTo(v, want[j][c], 1e-5)))
      assert.deepStrictEqual(json.classes, want.map((p) => p.indexOf(Math.max(...p))))
    }).pipe(Effect.provide(serve(TestGpu.layer()))))

  it.scoped("rejects bad input with 400 and a clear message", () =>
    Effect.gen(function*() {
      const short = yield* post({ inputs: [[1, 2, 3]] })
      assert.strictEqual(short.status, 400)
      assert.match(String(short.json.error), /each row needs 16 numbers, got 3/)
      const text = yield* post({ inputs: [Array(16).fill("a")] })
      assert.strictEqual(text.status, 400)
      assert.match(String(text.json.error), /Expected number/)
      const none = yield* post({ inputs: [] })
      assert.strictEqual(none.status, 400)
      assert.match(String(none.json.error), /send 1 to 32 rows, got 0/)
      const wrongShape = yield* post({ rows: [] })
      assert.strictEqual(wrongShape.status, 400)
    }).pipe(Effect.provide(serve(TestGpu.layer()))))

  it.scoped("values finite as doubles but not as f32 get 400; so does malformed JSON, saying where", () =>
    Effect.gen(function*() {
      for (const v of [1e39, -3.5e38]) {
        const row = new Array(Mlp.INPUT).fill(0.5)
        row[3] = v
        const res = yield* post({ inputs: [row] })
        assert.strictEqual(res.status, 400, String(v))
        assert.match(String(res.json.error), /inputs\.0\.3: .*f32/)
      }
      const client = yield* HttpClient.HttpClient
      const bad = yield* client.post("/infer", { body: HttpBody.text("{\"inputs\": [[1, 2,]]}", "application/json") })
      assert.strictEqual(bad.status, 400)
      assert.match(
        String(((yield* bad.json) as Record<string, unknown>).error),
        /malformed JSON: unexpected "]" at line 1, column 19/
      )
      // a schema failure says what is expected, not the schema's description
      const shape = yield* post({ rows: [] })
      assert.strictEqual(shape.status, 400)
      assert.notInclude(String(shape.json.error), "readonly")
    }).pipe(Effect.provide(serve(TestGpu.layer()))))

  it.scoped("a body over the limit gets 413; a wrong method 405 with Allow", () =>
    Effect.gen(function*() {
      const client = yield* HttpClient.HttpClient
      const big = yield* client.post("/infer", { body: HttpBody.text(" ".repeat(2 * 1024 * 1024), "application/json") })
      assert.strictEqual(big.status, 413)
      const get = yield* client.get("/infer")
      assert.strictEqual(get.status, 405)
      assert.strictEqual(get.headers["allow"], "POST")
      const put = yield* client.put("/health")
      assert.strictEqual(put.status, 405)
      assert.strictEqual(put.headers["allow"], "GET")
    }).pipe(Effect.provide(serve(TestGpu.layer()))))

  it.live("concurrent requests are answered by fewer computes, each its own rows", () =>
    Effect.gen(function*() {
      const gpu = yield* TestGpu.TestGpu
      const before = (yield* gpu.counters).submits
      const inputs = Array.from({ length: 40 }, (_, i) => rows(1 + (i % 3), 100 + i))
      const answers = yield* Effect.forEach(inputs, (input) => post({ inputs: input }), { concurrency: "unbounded" })
      const submits = (yield* gpu.counters).submits - before
      assert.isBelow(submits, inputs.length, `${submits} computes for ${inputs.length} requests`)
      answers.forEach((a, i) => {
        assert.strictEqual(a.status, 200)
        const want = expected(inputs[i])
        const got = a.json.probabilities as Array<Array<number>>
        assert.strictEqual(got.length, want.length)
        got.forEach((p, j) => p.forEach((v, c) => assert.closeTo(v, want[j][c], 1e-5)))
      })
    }).pipe(Effect.provide(Layer.merge(serve(slowGpu), slowGpu)), Effect.scoped))

  it.scoped("a simulated out-of-memory at startup fails the service with AllocationError", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(Layer.build(serve(TestGpu.layer({ faults: { allocationFailsAt: 1 } }))))
      assert.instanceOf(e, GpuError.AllocationError)
      assert.match(e.message, /simulated out of memory/)
    }))

  it.scoped("a device lost during a request answers 503, then the rebuilt device serves again", () =>
    Effect.gen(function*() {
      const input = rows(2, 3)
      const first = yield* post({ inputs: input })
      assert.strictEqual(first.status, 200)
      const lost = yield* post({ inputs: input })
      assert.strictEqual(lost.status, 503)
      assert.match(String(lost.json.error), /lost.*reloaded/)
      const again = yield* post({ inputs: input })
      assert.strictEqual(again.status, 200)
      assert.deepStrictEqual(again.json.probabilities, first.json.probabilities)
    }).pipe(Effect.provide(serve(TestGpu.layer({ faults: { deviceLostAtSubmit: 2 } })))))

  it.scoped("runs on the CPU by swapping the layer", () =>
    Effect.gen(function*() {
      const { json, status } = yield* post({ inputs: rows(1, 9) })
      assert.strictEqual(status, 200)
      assert.strictEqual(json.device, "CPU")
    }).pipe(Effect.provide(serve(Cpu.layer()))))
})
