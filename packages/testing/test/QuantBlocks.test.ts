import { Quant } from "@effect-gpu/core"
import type { DType } from "@effect-gpu/core"
import { GgmlReference } from "@effect-gpu/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { loadReference } from "./reference.js"

const suite = loadReference("ggml-next")

describe("Quant against ggml's blocks", () => {
  it("quantize gives ggml's q8_0 and q4_0 blocks byte for byte", () => {
    for (const type of ["q8_0", "q4_0"] as const) {
      const c = suite.cases.find((c) => c.name === `cpy_f32_to_${type}`)!
      const values = GgmlReference.values(suite, c.inputs[0]) as Float32Array
      const blocks = Quant.unsafeQuantize(type, values)
      const expected = GgmlReference.values(suite, c.output) as Uint8Array
      assert.strictEqual(blocks.length, expected.length)
      assert.deepStrictEqual(blocks, expected, type)
    }
  })

  it("dequantize gives ggml's values bit for bit, for every type", () => {
    for (const type of ["q8_0", "q4_0", "q4_1", "q5_0", "q4_K", "q6_K"] as const) {
      const c = suite.cases.find((c) => c.name === `cpy_${type}_to_f32`)!
      const blocks = GgmlReference.values(suite, c.inputs[0]) as Uint8Array
      const expected = GgmlReference.values(suite, c.output) as Float32Array
      assert.deepStrictEqual(Quant.unsafeDequantize(type as DType.Quantized, blocks), expected, type)
    }
  })

  it("quantize then dequantize stays within each type's noise; whole blocks only", () => {
    const x = Float32Array.from({ length: 512 }, (_, i) => Math.sin(i * 0.37) * (1 + (i % 7)))
    const bounds: Record<DType.Quantized, number> = {
      q8_0: 1e-4,
      q4_0: 1.5e-2,
      q4_1: 1e-2,
      q5_0: 4e-3,
      q4_K: 5e-3,
      q6_K: 5e-4
    }
    for (const [type, bound] of Object.entries(bounds) as Array<[DType.Quantized, number]>) {
      const y = Quant.unsafeDequantize(type, Quant.unsafeQuantize(type, x))
      let num = 0
      let den = 0
      for (let i = 0; i < x.length; i++) {
        num += (y[i] - x[i]) ** 2
        den += x[i] ** 2
      }
      assert.isBelow(num / den, bound, type)
    }
    assert.strictEqual(Effect.runSync(Effect.flip(Quant.quantize("q4_K", new Float32Array(100))))._tag, "ShapeError")
    assert.strictEqual(Effect.runSync(Effect.flip(Quant.dequantize("q8_0", new Uint8Array(35))))._tag, "ShapeError")
  })
})
