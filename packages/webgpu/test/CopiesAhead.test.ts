/**
 * A prompt's weight copies made beside the dispatches before their products (copiesAhead, sideJob.ts):
 * forced with the f16 copy on the adapter at hand, each graph computed with and without and against the
 * CPU. The kernels are the same either way, so the two devices' results must be equal value for value.
 */
import type { DType } from "@effect-gpu/core"
import { Graph, Op, Ops, Quant, Tensor } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as KernelSpec from "../src/internal/kernels/kernel.js"
import * as SideJob from "../src/internal/kernels/sideJob.js"
import { adapterAvailable, nmse, onDeviceAndCpu } from "./utils.js"

/** a kernel of `size` invocations whose module declares `decls`, on operands a and d */
const kernelOf = (size: number, decls: string, body: string, workgroups: readonly [number, number, number]) => {
  const t = Tensor.unsafeMake("t", "f32", [4, 1, 1, 1], Op.Op.None(), [])
  return KernelSpec.make({
    variant: { family: `k${size}` },
    operands: [{ name: "a", tensor: t }, { name: "d", tensor: t }],
    params: [KernelSpec.u32("per", 3)],
    workgroups,
    main: `${decls}\n${KernelSpec.entry(size)}\n${body}\n}`
  })
}

describe("side jobs (sideJob.ts)", () => {
  // the job's names prefixed (its module's declarations, its operands' accessors and fields, its parameters),
  // the host's kept; refused where the workgroup sizes differ or both modules' workgroup memory passes the
  // adapter's
  it("a host carries a job in workgroups of its own, or refuses it", () => {
    const host = kernelOf(256, "var<workgroup> A: array<array<vec4<f32>, 25>, 10>;", "  st_d(lid, ld_a(wid.x));", [
      4,
      2,
      1
    ])
    const job = kernelOf(
      256,
      "var<workgroup> S: array<u32, 545>;\nfn swat(o: u32) -> u32 { return S[o]; }",
      "  S[lid] = qwi_a(P.per + P.a_ne1);\n  workgroupBarrier();\n  st4_d(lid, vec4<f32>(f32(swat(lid))));",
      [5, 1, 1]
    )
    assert.strictEqual(SideJob.workgroupBytes(host.main), 4000)
    assert.strictEqual(SideJob.workgroupBytes(job.main), 2180)
    const both = SideJob.withSideJob(host, job, 16384)!
    assert.strictEqual(both.variant.side, job.key)
    assert.deepStrictEqual(both.operands.map((o) => [o.name, o.binding, o.writes]), [
      ["a", undefined, undefined],
      ["d", undefined, undefined],
      ["ja", "plain", undefined],
      ["jd", "plain", true]
    ])
    assert.deepStrictEqual(both.workgroups, [13, 1, 1])
    assert.strictEqual(both.fallback, host)
    for (const name of ["j_S", "j_swat", "qwi_ja(P.j_per + P.ja_ne1)", "st4_jd("]) assert.include(both.main, name)
    // one entry point: the job's body with its workgroup reckoned, the host's with its own
    assert.strictEqual(both.main.match(/@compute/g)?.length, 1)
    assert.match(
      both.main,
      /if \(side_job\) \{\s*let wid = vec3<u32>\(side_idx, 0u, 0u\);\s*let nwg = vec3<u32>\(5u, 1u, 1u\);/
    )
    assert.match(both.main, /\} else \{\s*let wid = vec3<u32>\(side_idx % P.side_hx/)
    assert.include(both.main, "st_d(lid, ld_a(wid.x))")
    assert.notInclude(both.main, "qwi_a(")
    assert.notInclude(both.main, "fn j_main(")
    assert.isUndefined(SideJob.withSideJob(host, job, 6000))
    assert.isUndefined(SideJob.withSideJob(host, kernelOf(128, "", "", [1, 1, 1]), 16384))
  })
})

describe.skipIf(!adapterAvailable)("WebGPU copies ahead", () => {
  // three quantized products in a row, a norm between the second and the third (a dispatch that hosts
  // nothing: the third's copy goes past it to the second product); each block form of the copy rides along
  // (q4_0 and q8_0 runs staged, q4_K's blocks staged, q5_0 a piece a thread), and the first product's copy,
  // with no dispatch before it, keeps its own
  it.scoped(
    "copies made beside the products before theirs (side=half_copy) give the results of copies apart",
    () =>
      Effect.gen(function*() {
        const [apart] = yield* WebGpu.make({ devices: 1, quantizedPrefill: "copy" })
        if (!apart.description.includes("shader-f16")) return console.log("no shader-f16 here: no f16 copy")
        const [ahead] = yield* WebGpu.make({ devices: 1, quantizedPrefill: "copy", copiesAhead: true })
        const chains: ReadonlyArray<readonly [DType.Quantized, DType.Quantized, DType.Quantized]> = [
          ["q8_0", "q4_0", "q8_0"],
          ["q4_K", "q5_0", "q6_K"]
        ]
        for (const types of chains) {
          const [K, N] = [512, 40]
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [K, N])
          const ws = yield* Effect.forEach(types, (t, i) => g.param(`w${i}`, t, [K, i === 1 ? 256 : K]))
          const w = yield* g.param("w", "f32", [K])
          const h1 = Ops.mulMat(ws[0], x)
          const h2 = Ops.mulMat(ws[1], h1)
          const h3 = Ops.mulMat(ws[2], Ops.mul(Ops.rmsNorm(Ops.concat(h2, h2, 0), 1e-5), w))
          const y = yield* g.output(h3)
          const graph = g.build()
          const set = (plan: Parameters<Parameters<typeof onDeviceAndCpu>[3]>[0]) =>
            Effect.gen(function*() {
              for (const [i, wt] of ws.entries()) {
                yield* plan.set(wt, Quant.unsafeQuantize(types[i], Generators.values(i + 1, Tensor.nelements(wt))))
              }
              yield* plan.set(x, Generators.values(7, K * N))
              yield* plan.set(w, Generators.values(8, K).map((z) => 1 + z))
            })
          const before = yield* onDeviceAndCpu(apart, graph, graph, set, [y])
          // the program's two copy buffers go with it
          const live = WebGpuDevice.liveNativeBuffers(ahead)
          const after = yield* Effect.scoped(onDeviceAndCpu(ahead, graph, graph, set, [y]))
          assert.strictEqual(WebGpuDevice.liveNativeBuffers(ahead), live)
          const what = `${types.join(",")}: ${after.entries.map((e) => e.kernel).join(" + ")}`
          const families = (entries: typeof after.entries) => entries.map((e) => e.variant?.family)
          assert.strictEqual(families(before.entries).filter((f) => f === "half_copy").length, 3, what)
          // the first copy apart; the second beside the first product, the third beside the second
          assert.strictEqual(families(after.entries).filter((f) => f === "half_copy").length, 1, what)
          const sides = after.entries.filter((e) => e.variant?.side !== undefined)
          assert.deepStrictEqual(sides.map((e) => e.op), ["mul_mat", "mul_mat"], what)
          assert.isTrue(sides.every((e) => String(e.variant?.side).startsWith("half_copy")), what)
          assert.strictEqual(after.entries.length, before.entries.length - 2, what)
          assert.deepStrictEqual(after.gpu, before.gpu, what)
          // three products over f16 copies of their weights (the CPU keeps them exact): 1e-4 a product
          assert.isBelow(nmse(after.gpu, after.cpu), 3e-4, what)
        }
      }),
    120_000
  )
})
