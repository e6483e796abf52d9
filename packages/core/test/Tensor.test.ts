import { Cpu, Ops, Tensor, TensorData } from "@effect-gpu/core"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { evaluate } from "./utils.js"

const iota = (n: number) => Array.from({ length: n }, (_, i) => i + 1)

describe("tensor layout", () => {
  it.effect("contiguous strides and sizes follow ggml", () =>
    Effect.gen(function*() {
      const t = yield* Tensor.make("t", "f32", [7, 5, 2])
      assert.deepStrictEqual(t.ne, [7, 5, 2, 1])
      assert.deepStrictEqual(t.nb, [4, 28, 140, 280])
      assert.strictEqual(Tensor.nbytes(t), 280)
      const h = yield* Tensor.make("h", "f16", [3, 2])
      assert.deepStrictEqual(h.nb, [2, 6, 12, 12])
      const q = yield* Tensor.make("q", "q8_0", [64, 3])
      assert.deepStrictEqual(q.nb, [34, 68, 204, 204])
      assert.strictEqual(Tensor.nbytes(q), 204)
    }))

  it.effect("permute moves dimension i to axes[i]; transpose swaps 0 and 1", () =>
    Effect.gen(function*() {
      const t = yield* Tensor.make("t", "f32", [7, 5, 2, 3])
      const p = yield* Tensor.permute(t, [2, 0, 3, 1])
      assert.deepStrictEqual(p.ne, [5, 3, 7, 2])
      assert.deepStrictEqual(p.nb, [28, 280, 4, 140])
      assert.isFalse(Tensor.isContiguous(p))
      assert.strictEqual(Tensor.nbytes(p), Tensor.nbytes(t))
      const tr = yield* Tensor.transpose(t)
      assert.deepStrictEqual(tr.ne, [5, 7, 2, 3])
      assert.deepStrictEqual(tr.nb, [28, 4, 140, 280])
      assert.strictEqual(p.viewSrc, t)
    }))

  it.effect("views compose offsets and keep the owner", () =>
    Effect.gen(function*() {
      const t = yield* Tensor.make("t", "f32", [14, 5, 2])
      const v = yield* Tensor.view(t, [7, 4, 2], [56, 280], 68)
      assert.deepStrictEqual(v.nb, [4, 56, 280, 560])
      assert.strictEqual(v.viewOffset, 68)
      const w = yield* Tensor.view(v, [3], [], 8)
      assert.strictEqual(w.viewOffset, 76)
      assert.strictEqual(w.viewSrc, t)
      const r = yield* Tensor.reshape(t, [70, 2])
      assert.deepStrictEqual(r.nb, [4, 280, 560, 560])
      assert.isTrue(Tensor.isContiguous(r))
    }))
})

layer(Cpu.layer())("views computed on the CPU match explicit index arithmetic", (it) => {
  it.effect("cont of a permutation", () =>
    Effect.gen(function*() {
      const ne = [3, 4, 2, 2]
      const x = iota(48)
      const r = yield* evaluate([{ dtype: "f32", ne, data: x }], (a) => Ops.cont(Ops.permute(a, [2, 0, 3, 1])))
      assert.deepStrictEqual(r.shape, [4, 2, 3, 2])
      // out[i0, i1, i2, i3] = a[j0, j1, j2, j3] with j_k = i_{axes[k]}
      const want: Array<number> = []
      for (let i3 = 0; i3 < 2; i3++) {
        for (let i2 = 0; i2 < 3; i2++) {
          for (let i1 = 0; i1 < 2; i1++) {
            for (let i0 = 0; i0 < 4; i0++) {
              const [j0, j1, j2, j3] = [i2, i0, i3, i1]
              want.push(x[j0 + 3 * j1 + 12 * j2 + 24 * j3])
            }
          }
        }
      }
      assert.deepStrictEqual(r.values, want)
    }))

  it.effect("cont of a strided view with an offset", () =>
    Effect.gen(function*() {
      const x = iota(14 * 5 * 2)
      const r = yield* evaluate(
        [{ dtype: "f32", ne: [14, 5, 2], data: x }],
        (a) => Ops.cont(Ops.view(a, [7, 4, 2], [56, 280], 68))
      )
      const want: Array<number> = []
      for (let i2 = 0; i2 < 2; i2++) {
        for (let i1 = 0; i1 < 4; i1++) {
          for (let i0 = 0; i0 < 7; i0++) want.push(x[(68 + i0 * 4 + i1 * 56 + i2 * 280) / 4])
        }
      }
      assert.deepStrictEqual(r.values, want)
    }))

  it.effect("an element-wise op reads a transposed view", () =>
    Effect.gen(function*() {
      const r = yield* evaluate(
        [{ dtype: "f32", ne: [3, 2], data: [1, 2, 3, 4, 5, 6] }, {
          dtype: "f32",
          ne: [2, 3],
          data: [0, 0, 0, 0, 0, 0]
        }],
        (a, z) => Ops.add(Ops.transpose(a), z)
      )
      assert.deepStrictEqual(r.values, [1, 4, 2, 5, 3, 6])
    }))
})

describe("decoding bytes", () => {
  // owned bytes (a whole buffer nobody else holds) are viewed in place; any other bytes are copied, so the
  // values never alias the caller's array
  it("views owned whole bytes and copies the rest", () => {
    const bytes = new Uint8Array(new Float32Array([1.5, -2, 3]).buffer)
    const owned = TensorData.decode("f32", bytes, true) as Float32Array
    assert.deepStrictEqual(Array.from(owned), [1.5, -2, 3])
    assert.strictEqual(owned.buffer, bytes.buffer)
    const copied = TensorData.decode("f32", bytes) as Float32Array
    assert.notStrictEqual(copied.buffer, bytes.buffer)
    // a view into a larger array is copied even when said to be owned
    const part = TensorData.decode("f32", bytes.subarray(4), true) as Float32Array
    assert.deepStrictEqual(Array.from(part), [-2, 3])
    assert.notStrictEqual(part.buffer, bytes.buffer)
  })
})
