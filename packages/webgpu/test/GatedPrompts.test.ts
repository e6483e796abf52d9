/**
 * A prompt's gated FFN as one product (mul_mat_swiglu past the matrix-vector columns): one product over gate's
 * and up's weights stacked, swiglu reading its rows' two halves, fused by the device into a product whose
 * tiles pair each gate row with its up row and store silu(gate) * up. Each form the adapter at hand runs is
 * forced and matched against the CPU's unfused graph: register tiles, the scalar tiles (K not a multiple of
 * 4, activations off 16-byte boundaries, quantized weights dequantized as they are staged), and an f16 copy
 * of quantized weights first; edges, batches of activations over one stack; register tiles whose
 * neighbouring workgroups take one row block's column blocks. The subgroup-matrix form is
 * checked on a GPU that has them (bench/probes/kernel-check.ts, section `gated`).
 */
import { DType, Tensor } from "@effect-gpu/core"
import { Graph, Ops, Quant } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { adapterAvailable, fusedOnBoth, nmse } from "./utils.js"

interface Case {
  readonly dtype: "f32" | "f16" | DType.Quantized
  /** rows of gate (and of up), K, columns, batches of the activations */
  readonly F: number
  readonly K: number
  readonly N: number
  readonly batches: number
  /** the activations a view one value into their input (offsets off 16-byte boundaries) */
  readonly shifted: boolean
}

/** a stack's product and the swiglu of its halves, on `device` (as it fuses it) and on the CPU */
const gatedOnBoth = (device: Parameters<typeof fusedOnBoth>[0], c: Case, seed: number) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const w = yield* g.param("gate_up", c.dtype, [c.K, 2 * c.F])
    const input = yield* g.input("x", "f32", [c.K * c.N * c.batches + 1])
    const x = Ops.view(input, [c.K, c.N, c.batches], [4 * c.K, 4 * c.K * c.N], c.shifted ? 4 : 0)
    const both = yield* Ops.mulMat(w, x)
    const gate = Ops.view(both, [c.F, c.N, c.batches], [both.nb[1], both.nb[2]], 0)
    const up = Ops.view(both, [c.F, c.N, c.batches], [both.nb[1], both.nb[2]], c.F * both.nb[0])
    const y = yield* g.output(Ops.swiglu(gate, up), "y")
    const graph = g.build()
    const values = Generators.values(seed, Tensor.nelements(w))
    const { cpu, entries, gpu } = yield* fusedOnBoth(
      device,
      graph,
      (plan) =>
        Effect.gen(function*() {
          yield* plan.set(w, DType.isQuantized(c.dtype) ? Quant.unsafeQuantize(c.dtype, values) : values)
          yield* plan.set(input, Generators.values(seed + 1, Tensor.nelements(input)))
        }),
      [y]
    )
    return { cpu, gpu, entries }
  })

describe.skipIf(!adapterAvailable)("WebGPU gated prompt products", () => {
  it.scoped(
    "each form of a stack's product with the swiglu of its halves matches the CPU",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        const [copying] = yield* WebGpu.make({ devices: 1, quantizedPrefill: "copy" })
        const [apart] = yield* WebGpu.make({ devices: 1, gatedPrompts: false })
        const [columns] = yield* WebGpu.make({ devices: 1, registerOrder: "columns" })
        if (d.description.includes("subgroup-matrix")) {
          console.log(`${d.description} has subgroup matrices: their gated form is checked by kernel-check`)
          return
        }
        // [case, device, the dispatches it runs, the product's family and whether its blocks are whole]:
        // register tiles of 8 rows a thread (whole blocks, then edges: 40 rows of gate, 20 columns), the
        // scalar tiles (K = 66 not a multiple of 4; activations one value in; q8_0 dequantized as staged), an
        // f16 copy of q4_0 weights first (its product on register tiles), and the device asked not to fuse
        const cases: ReadonlyArray<readonly [Case, typeof d, ReadonlyArray<string>, string, boolean]> = [
          [{ dtype: "f32", F: 128, K: 64, N: 128, batches: 1, shifted: false }, d, ["mul_mat_swiglu"], "mm4", true],
          [{ dtype: "f16", F: 40, K: 72, N: 20, batches: 2, shifted: false }, d, ["mul_mat_swiglu"], "mm4", false],
          [{ dtype: "f32", F: 40, K: 66, N: 20, batches: 1, shifted: false }, d, ["mul_mat_swiglu"], "mm", false],
          [{ dtype: "f32", F: 48, K: 64, N: 20, batches: 2, shifted: true }, d, ["mul_mat_swiglu"], "mm", false],
          [{ dtype: "q8_0", F: 48, K: 64, N: 12, batches: 1, shifted: false }, d, ["mul_mat_swiglu"], "mm", false],
          [
            { dtype: "q4_0", F: 40, K: 96, N: 20, batches: 1, shifted: false },
            copying,
            ["mul_mat_swiglu", "mul_mat_swiglu"],
            "mm4",
            false
          ],
          [{ dtype: "f32", F: 40, K: 72, N: 20, batches: 1, shifted: false }, apart, ["mul_mat", "glu"], "mm4", false],
          // neighbouring workgroups taking one row block's column blocks (registerOrder), whole and at edges
          [
            { dtype: "f32", F: 128, K: 64, N: 256, batches: 1, shifted: false },
            columns,
            ["mul_mat_swiglu"],
            "mm4",
            true
          ],
          [{ dtype: "f16", F: 40, K: 72, N: 20, batches: 2, shifted: false }, columns, ["mul_mat_swiglu"], "mm4", false]
        ]
        for (const [[c, device, ops, family, whole], i] of cases.map((x, i) => [x, i] as const)) {
          const what = `${JSON.stringify(c)}${
            device === copying ? " copied" : device === apart ? " apart" : device === columns ? " columns first" : ""
          }`
          const { cpu, entries, gpu } = yield* gatedOnBoth(device, c, 30 + i)
          assert.deepStrictEqual(entries.map((e) => e.op), ops, what)
          const product = entries.find((e) => e.variant?.family === family)
          assert.isDefined(product, `${what}: ${entries.map((e) => e.kernel).join(", ")}`)
          assert.strictEqual(product!.variant?.gated === true, device !== apart, `${what}: ${product!.kernel}`)
          if (family === "mm4") assert.strictEqual(product!.variant?.whole, whole, `${what}: ${product!.kernel}`)
          assert.strictEqual(product!.variant?.order, device === columns ? "columns" : undefined, what)
          if (device === copying) assert.strictEqual(entries[0].variant?.family, "half_copy", what)
          // the CPU multiplies quantized weights against activations rounded to q8_0 blocks, as ggml's does
          assert.isBelow(nmse(gpu, cpu), DType.isQuantized(c.dtype) ? 1e-4 : 1e-6, what)
        }
      }),
    { timeout: 120_000 }
  )
})
