import { Cpu, Float16, Ops } from "@effect-gpu/core"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { close, evaluate, random } from "./utils.js"

const f32 = (ne: ReadonlyArray<number>, data: ArrayLike<number>) => ({ dtype: "f32" as const, ne, data })
const i32 = (ne: ReadonlyArray<number>, data: ArrayLike<number>) => ({ dtype: "i32" as const, ne, data })

layer(Cpu.layer())("ops on the CPU backend: hand-computed cases", (it) => {
  it.effect("add broadcasts src1 over rows", () =>
    Effect.gen(function*() {
      const r = yield* evaluate([f32([3, 2], [1, 2, 3, 4, 5, 6]), f32([3, 1], [10, 20, 30])], Ops.add)
      assert.deepStrictEqual(r.values, [11, 22, 33, 14, 25, 36])
    }))

  it.effect("sub, mul, div broadcast a scalar and a column", () =>
    Effect.gen(function*() {
      const a = f32([2, 2], [1, 2, 3, 4])
      assert.deepStrictEqual((yield* evaluate([a, f32([1], [1])], Ops.sub)).values, [0, 1, 2, 3])
      assert.deepStrictEqual((yield* evaluate([a, f32([1, 2], [2, 3])], Ops.mul)).values, [2, 4, 9, 12])
      assert.deepStrictEqual((yield* evaluate([a, f32([2], [2, 4])], Ops.div)).values, [0.5, 0.5, 1.5, 1])
    }))

  it.effect("scale, sqr, sqrt, exp, log, clamp", () =>
    Effect.gen(function*() {
      const a = f32([4], [0.25, 1, 4, 9])
      assert.deepStrictEqual((yield* evaluate([a], (x) => Ops.scale(x, 2))).values, [0.5, 2, 8, 18])
      assert.deepStrictEqual((yield* evaluate([a], Ops.sqr)).values, [0.0625, 1, 16, 81])
      assert.deepStrictEqual((yield* evaluate([a], Ops.sqrt)).values, [0.5, 1, 2, 3])
      assert.isTrue(close((yield* evaluate([a], Ops.exp)).values, [0.25, 1, 4, 9].map(Math.exp)))
      assert.isTrue(close((yield* evaluate([a], Ops.log)).values, [0.25, 1, 4, 9].map(Math.log)))
      assert.deepStrictEqual((yield* evaluate([a], (x) => Ops.clamp(x, 0.5, 5))).values, [0.5, 1, 4, 5])
    }))

  it.effect("unary ops", () =>
    Effect.gen(function*() {
      const xs = [-2, -0.5, 0.5, 3]
      const a = f32([4], xs)
      const check = (kind: Parameters<typeof Ops.unary>[1], f: (x: number) => number) =>
        Effect.map(evaluate([a], (x) => Ops.unary(x, kind)), (r) => assert.isTrue(close(r.values, xs.map(f)), kind))
      yield* check("relu", (x) => Math.max(0, x))
      yield* check("neg", (x) => -x)
      yield* check("abs", Math.abs)
      yield* check("tanh", Math.tanh)
      yield* check("sigmoid", (x) => 1 / (1 + Math.exp(-x)))
      yield* check("silu", (x) => x / (1 + Math.exp(-x)))
      yield* check("gelu_quick", (x) => x / (1 + Math.exp(-1.702 * x)))
      yield* check("gelu", (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))))
    }))

  it.effect("mul_mat: y[i, j] = sum_k a[k, i] b[k, j], batches broadcast", () =>
    Effect.gen(function*() {
      // a: 2 rows of K=3; b: 2 columns of K=3
      const r = yield* evaluate([f32([3, 2], [1, 2, 3, 4, 5, 6]), f32([3, 2], [1, 0, 1, 0, 1, 0])], Ops.mulMat)
      assert.deepStrictEqual(r.shape, [2, 2, 1, 1])
      assert.deepStrictEqual(r.values, [4, 10, 2, 5])
      const b = yield* evaluate(
        [f32([2, 1, 1], [1, 1]), f32([2, 1, 3], [1, 2, 3, 4, 5, 6])],
        Ops.mulMat
      )
      assert.deepStrictEqual(b.values, [3, 7, 11])
    }))

  it.effect("mul_mat with f16 weights rounds activations to f16 like ggml", () =>
    Effect.gen(function*() {
      const r = yield* evaluate([{ dtype: "f16", ne: [2, 1], data: [1, 1] }, f32([2, 1], [0.1, 0.2])], Ops.mulMat)
      assert.strictEqual(r.values[0], Math.fround(Float16.round(0.1) + Float16.round(0.2)))
    }))

  it.effect("soft_max with mask and scale", () =>
    Effect.gen(function*() {
      const r = yield* evaluate(
        [f32([3, 1], [1, 2, 3]), f32([3, 1], [0, 0, -Infinity])],
        (a, m) => Ops.softMax(a, { mask: m, scale: 2 })
      )
      const e = [Math.exp(2 - 4), 1]
      assert.isTrue(close(r.values, [e[0] / (e[0] + 1), 1 / (e[0] + 1), 0]))
    }))

  it.effect("rms_norm and norm", () =>
    Effect.gen(function*() {
      const r = yield* evaluate([f32([2], [3, 4])], (a) => Ops.rmsNorm(a, 0))
      const s = Math.sqrt(12.5)
      assert.isTrue(close(r.values, [3 / s, 4 / s]))
      const n = yield* evaluate([f32([2], [1, 3])], (a) => Ops.normalize(a, 0))
      assert.isTrue(close(n.values, [-1, 1]))
    }))

  it.effect("rope rotates pairs by pos * base^(-2i/n)", () =>
    Effect.gen(function*() {
      const x = [1, 0, 1, 0]
      const normal = yield* evaluate([f32([4, 1, 1], x), i32([1], [2])], (a, p) => Ops.rope(a, p, { nDims: 4 }))
      const t1 = 2 * 10000 ** (-2 / 4)
      assert.isTrue(close(normal.values, [Math.cos(2), Math.sin(2), Math.cos(t1), Math.sin(t1)]))
      const neox = yield* evaluate(
        [f32([4, 1, 1], [1, 1, 0, 0]), i32([1], [2])],
        (a, p) => Ops.rope(a, p, { nDims: 4, mode: 2 })
      )
      assert.isTrue(close(neox.values, [Math.cos(2), Math.cos(t1), Math.sin(2), Math.sin(t1)]))
      const partial = yield* evaluate([f32([4, 1, 1], [1, 0, 7, 8]), i32([1], [1])], (a, p) =>
        Ops.rope(a, p, { nDims: 2 }))
      assert.isTrue(close(partial.values, [Math.cos(1), Math.sin(1), 7, 8]))
    }))

  it.effect("get_rows and set_rows", () =>
    Effect.gen(function*() {
      const a = f32([2, 3], [1, 2, 3, 4, 5, 6])
      const g = yield* evaluate([a, i32([2], [2, 0])], Ops.getRows)
      assert.deepStrictEqual(g.values, [5, 6, 1, 2])
      const s = yield* evaluate([a, f32([2, 1], [9, 8]), i32([1], [1])], Ops.setRows)
      assert.deepStrictEqual(s.values, [1, 2, 9, 8, 5, 6])
    }))

  it.effect("cpy converts f32 to f16 and back with rounding", () =>
    Effect.gen(function*() {
      const r = yield* evaluate([f32([3], [0.1, 65504, 1e-8])], (a) => Ops.cpy(a, "f16"))
      assert.deepStrictEqual(r.values, [Float16.round(0.1), 65504, 0])
      const back = yield* evaluate([{ dtype: "f16", ne: [2], data: [0.5, -2] }], (a) => Ops.cpy(a, "f32"))
      assert.deepStrictEqual(back.values, [0.5, -2])
    }))

  it.effect("reductions: sum_rows, sum, mean, cumsum, argmax", () =>
    Effect.gen(function*() {
      const a = f32([3, 2], [1, 5, 2, 7, 0, 3])
      assert.deepStrictEqual((yield* evaluate([a], Ops.sumRows)).values, [8, 10])
      assert.deepStrictEqual((yield* evaluate([a], Ops.sum)).values, [18])
      assert.isTrue(close((yield* evaluate([a], Ops.mean)).values, [8 / 3, 10 / 3]))
      assert.deepStrictEqual((yield* evaluate([a], Ops.cumsum)).values, [1, 6, 8, 7, 7, 10])
      assert.deepStrictEqual((yield* evaluate([a], Ops.argmax)).values, [1, 0])
    }))

  it.effect("argsort and top_k", () =>
    Effect.gen(function*() {
      const a = f32([4], [0.3, -1, 2, 0.5])
      assert.deepStrictEqual((yield* evaluate([a], (x) => Ops.argsort(x, "asc"))).values, [1, 0, 3, 2])
      assert.deepStrictEqual((yield* evaluate([a], (x) => Ops.argsort(x, "desc"))).values, [2, 3, 0, 1])
      assert.deepStrictEqual((yield* evaluate([a], (x) => Ops.topK(x, 2))).values.sort(), [2, 3])
    }))

  it.effect("concat, pad, repeat, diag_mask_inf", () =>
    Effect.gen(function*() {
      const a = f32([2, 2], [1, 2, 3, 4])
      const b = f32([1, 2], [9, 8])
      assert.deepStrictEqual((yield* evaluate([a, b], (x, y) => Ops.concat(x, y, 0))).values, [1, 2, 9, 3, 4, 8])
      assert.deepStrictEqual((yield* evaluate([a, f32([2, 1], [5, 6])], (x, y) => Ops.concat(x, y, 1))).values, [
        1,
        2,
        3,
        4,
        5,
        6
      ])
      assert.deepStrictEqual((yield* evaluate([a], (x) => Ops.pad(x, [1, 1, 0, 0]))).values, [
        1,
        2,
        0,
        3,
        4,
        0,
        0,
        0,
        0
      ])
      const shape = f32([2, 4], new Array(8).fill(0))
      assert.deepStrictEqual((yield* evaluate([f32([2, 1], [1, 2]), shape], Ops.repeat)).values, [
        1,
        2,
        1,
        2,
        1,
        2,
        1,
        2
      ])
      const m = yield* evaluate([f32([3, 2], [1, 1, 1, 1, 1, 1])], (x) => Ops.diagMaskInf(x, 0))
      assert.deepStrictEqual(m.values, [1, -Infinity, -Infinity, 1, 1, -Infinity])
    }))

  it.effect("glu: swiglu and geglu on halves, swapped, and split", () =>
    Effect.gen(function*() {
      const silu = (x: number) => x / (1 + Math.exp(-x))
      const a = f32([4], [1, -1, 2, 3])
      assert.isTrue(close((yield* evaluate([a], (x) => Ops.swiglu(x))).values, [silu(1) * 2, silu(-1) * 3]))
      assert.isTrue(close(
        (yield* evaluate([a], (x) => Ops.glu(x, "swiglu", { swapped: true }))).values,
        [silu(2) * 1, silu(3) * -1]
      ))
      assert.isTrue(
        close((yield* evaluate([f32([2], [1, 2]), f32([2], [3, 4])], Ops.swiglu)).values, [silu(1) * 3, silu(2) * 4])
      )
      const gelu1 = 0.5 * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * 1.044715))
      assert.isTrue(close((yield* evaluate([f32([2], [1, 2])], (x) => Ops.geglu(x))).values, [gelu1 * 2]))
    }))
})

describe("ops on the CPU backend: properties", () => {
  const rows = fc.record({
    ne0: fc.integer({ min: 1, max: 40 }),
    ne1: fc.integer({ min: 1, max: 6 }),
    seed: fc.integer()
  })
  const run = <A>(e: Effect.Effect<A, unknown, any>) => e.pipe(Effect.provide(Cpu.layer()))

  it.effect.prop("soft_max rows sum to 1", [rows], ([{ ne0, ne1, seed }]) =>
    run(Effect.gen(function*() {
      const r = yield* evaluate([f32([ne0, ne1], random(seed)(ne0 * ne1).map((x) => x * 5))], (a) => Ops.softMax(a))
      for (let j = 0; j < ne1; j++) {
        const s = r.values.slice(j * ne0, (j + 1) * ne0).reduce((p, q) => p + q, 0)
        assert.closeTo(s, 1, 1e-5)
      }
    })), { fastCheck: { numRuns: 25 } })

  it.effect.prop(
    "rope preserves the norm of each rotated pair",
    [rows],
    ([{ ne1, seed }]) =>
      run(Effect.gen(function*() {
        const ne0 = 8
        const x = random(seed)(ne0 * ne1 * 3)
        const pos = [0, 7, 123]
        for (const mode of [0, 2] as const) {
          const r = yield* evaluate(
            [f32([ne0, ne1, 3], x), i32([3], pos)],
            (a, p) => Ops.rope(a, p, { nDims: ne0, mode })
          )
          for (let row = 0; row < ne1 * 3; row++) {
            for (let i = 0; i < ne0 / 2; i++) {
              const [j0, j1] = mode === 0 ? [2 * i, 2 * i + 1] : [i, i + ne0 / 2]
              const o = row * ne0
              assert.closeTo(Math.hypot(r.values[o + j0], r.values[o + j1]), Math.hypot(x[o + j0], x[o + j1]), 1e-5)
            }
          }
        }
      })),
    { fastCheck: { numRuns: 15 } }
  )

  it.effect.prop("argsort yields a sorting permutation", [rows], ([{ ne0, ne1, seed }]) =>
    run(Effect.gen(function*() {
      const x = random(seed)(ne0 * ne1)
      for (const order of ["asc", "desc"] as const) {
        const r = yield* evaluate([f32([ne0, ne1], x)], (a) => Ops.argsort(a, order))
        for (let j = 0; j < ne1; j++) {
          const idx = r.values.slice(j * ne0, (j + 1) * ne0)
          assert.deepStrictEqual([...idx].sort((p, q) => p - q), Array.from({ length: ne0 }, (_, i) => i))
          for (let i = 1; i < ne0; i++) {
            const [p, q] = [x[j * ne0 + idx[i - 1]], x[j * ne0 + idx[i]]]
            assert.isTrue(order === "asc" ? p <= q : p >= q)
          }
        }
      }
    })), { fastCheck: { numRuns: 25 } })

  it.effect.prop(
    "rms_norm rows have mean square 1; norm rows mean 0 and variance 1",
    [rows],
    ([{ ne0, ne1, seed }]) =>
      run(Effect.gen(function*() {
        const n = Math.max(ne0, 2)
        const x = random(seed)(n * ne1)
        const r = yield* evaluate([f32([n, ne1], x)], (a) => Ops.rmsNorm(a, 0))
        const z = yield* evaluate([f32([n, ne1], x)], (a) => Ops.normalize(a, 0))
        for (let j = 0; j < ne1; j++) {
          const row = r.values.slice(j * n, (j + 1) * n)
          assert.closeTo(row.reduce((s, v) => s + v * v, 0) / n, 1, 1e-4)
          const zr = z.values.slice(j * n, (j + 1) * n)
          const mean = zr.reduce((s, v) => s + v, 0) / n
          assert.closeTo(mean, 0, 1e-5)
          if (new Set(x.slice(j * n, (j + 1) * n)).size > 1) {
            assert.closeTo(zr.reduce((s, v) => s + (v - mean) ** 2, 0) / n, 1, 1e-3)
          }
        }
      })),
    { fastCheck: { numRuns: 25 } }
  )

  it.effect.prop(
    "top_k returns the k largest of each row",
    [rows],
    ([{ ne0, ne1, seed }]) =>
      run(Effect.gen(function*() {
        const x = random(seed)(ne0 * ne1)
        const k = Math.max(1, Math.floor(ne0 / 2))
        const r = yield* evaluate([f32([ne0, ne1], x)], (a) => Ops.topK(a, k))
        for (let j = 0; j < ne1; j++) {
          const row = x.slice(j * ne0, (j + 1) * ne0)
          const want = [...row].sort((p, q) => q - p).slice(0, k)
          const got = r.values.slice(j * k, (j + 1) * k).map((i) => row[i]).sort((p, q) => q - p)
          assert.deepStrictEqual(got, want)
        }
      })),
    { fastCheck: { numRuns: 25 } }
  )

  it.effect.prop("cumsum ends at the row sum", [rows], ([{ ne0, ne1, seed }]) =>
    run(Effect.gen(function*() {
      const x = random(seed)(ne0 * ne1)
      const c = yield* evaluate([f32([ne0, ne1], x)], Ops.cumsum)
      const s = yield* evaluate([f32([ne0, ne1], x)], Ops.sumRows)
      for (let j = 0; j < ne1; j++) assert.closeTo(c.values[(j + 1) * ne0 - 1], s.values[j], 1e-5)
    })), { fastCheck: { numRuns: 25 } })
})
