/**
 * Which flash_attn_ext kernels the WebGPU backend generates for a device's limits: pure, no adapter needed.
 */
import { Graph, Ops } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { scratchBytes } from "../src/internal/kernels/attention.js"
import type { KernelTarget } from "../src/internal/kernels/kernel.js"
import { kernelFor } from "../src/internal/kernels/select.js"

const gpu: KernelTarget = { f16: true, maxWorkgroups: 65535, subgroups: true, subgroupMatrix: true }

describe("flash_attn_ext kernel choice", () => {
  it.effect("flash attention: split decode for up to 8 rows on subgroups, subgroup matrices for more, else rows", () =>
    Effect.gen(function*() {
      const attention = (nQ: number, nKv = 4096, D = 128) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const q = yield* g.input("q", "f32", [D, nQ, 32])
          const k = yield* g.input("k", "f16", [D, nKv, 8])
          const v = yield* g.input("v", "f16", [D, nKv, 8])
          const mask = yield* g.input("mask", "f16", [nKv, nQ])
          return yield* g.output(Ops.flashAttnExt(q, k, v, { scale: 0.1, mask }))
        })
      const h200: KernelTarget = { ...gpu, subgroupSize: 32, workgroupStorage: 49152 }
      const chosen = (y: Parameters<typeof kernelFor>[0], target: KernelTarget) => {
        const kernel = kernelFor(y, target)!
        const v = kernel.variant
        return [v.family, v.heads, v.split, kernel.next?.variant.family].filter((x) => x !== undefined).join(" ")
      }
      const decode = yield* attention(1)
      // 8 KV heads of 4 query heads each, the keys in 32 splits of 128 (a key a lane, 4 subgroups of 32) merged
      // by a second dispatch
      assert.strictEqual(chosen(decode, h200), "flash_attn_decode 4 true flash_attn_merge")
      assert.strictEqual(kernelFor(decode, h200)!.variant.across, "keys")
      assert.strictEqual(kernelFor(decode, { ...h200, software: true })!.variant.across, "dims")
      // the splits' scratch: (max, sum, 128 outputs) per head and split
      assert.strictEqual(scratchBytes(decode, h200), 4 * 32 * 32 * 130)
      // lanes across the head dimension: a split per 32 keys, 64 at most
      const dims = { ...h200, attentionDecode: { across: "dims" as const } }
      assert.strictEqual(scratchBytes(decode, dims), 4 * 32 * 64 * 130)
      // 640 keys: 5 splits of 128; across the head dimension a split per 32 (20), 128 on a software adapter (5)
      const cached = yield* attention(1, 640)
      assert.strictEqual(scratchBytes(cached, h200), 4 * 32 * 5 * 130)
      assert.strictEqual(scratchBytes(cached, dims), 4 * 32 * 20 * 130)
      assert.strictEqual(scratchBytes(cached, { ...dims, software: true }), 4 * 32 * 5 * 130)
      // 640 keys in 5 splits give 8 KV heads 40 workgroups of 4 heads: a workgroup a head instead (160); 4096
      // keys' 32 splits give 256 of 4 heads; a software adapter keeps the most heads
      assert.strictEqual(chosen(cached, h200), "flash_attn_decode 1 true flash_attn_merge")
      assert.strictEqual(kernelFor(cached, { ...h200, software: true })!.variant.heads, 4)
      assert.strictEqual(kernelFor(cached, { ...h200, attentionDecode: { heads: 2 } })!.variant.heads, 2)
      // 3 heads do not divide a KV head's 4: the default stays
      assert.strictEqual(kernelFor(cached, { ...h200, attentionDecode: { heads: 3 } })!.variant.heads, 1)
      // few keys: one split, no scratch
      const short = yield* attention(1, 32)
      assert.strictEqual(chosen(short, h200), "flash_attn_decode 1 false")
      assert.strictEqual(scratchBytes(short, h200), 0)
      // the subgroup size must be known, else the matrix form takes any rows; without either, the row form
      const { subgroupSize: _, ...sizeUnknown } = h200
      // (a query row's 32 workgroups: its keys split in 4)
      assert.strictEqual(chosen(decode, sizeUnknown), "flash_attn_tiles flash_attn_merge")
      assert.strictEqual(kernelFor(decode, sizeUnknown)!.variant.splits, 4)
      assert.strictEqual(chosen(decode, { ...h200, subgroups: false, subgroupMatrix: false }), "flash_attn")
      // prompts: the one-pass form with the two-pass one to fall back on (bindings not aligned for 8-f16
      // loads), 128 query rows a workgroup where that gives 128 workgroups (one an SM), else 64; the two-pass
      // form alone where K, V or the mask's rows do not load 8 f16 at a time
      const prefill = yield* attention(512)
      assert.strictEqual(chosen(prefill, h200), "flash_attn_tiles")
      assert.strictEqual(kernelFor(prefill, h200)!.fallback?.variant.family, "flash_attn_mma")
      assert.strictEqual(kernelFor(prefill, h200)!.variant.subgroups, 8)
      assert.strictEqual(kernelFor(prefill, h200)!.variant.splits, undefined)
      assert.strictEqual(scratchBytes(prefill, h200), 0)
      assert.strictEqual(kernelFor(prefill, { ...h200, attentionPrefill: { subgroups: 4 } })!.variant.subgroups, 4)
      // few query rows over many keys (64 over 4096: 32 workgroups) split the keys until 128 workgroups (4
      // splits), merged by a second dispatch; their scratch (max, sum, 128 outputs) per query row, head and
      // split; none where asked unsplit
      const few = yield* attention(64)
      assert.strictEqual(chosen(few, h200), "flash_attn_tiles flash_attn_merge")
      assert.deepInclude(kernelFor(few, h200)!.variant, { subgroups: 8, splits: 4 })
      assert.strictEqual(scratchBytes(few, h200), 4 * 64 * 32 * 4 * 130)
      const unsplit = { ...h200, attentionPrefill: { splits: 1 } }
      assert.strictEqual(chosen(few, unsplit), "flash_attn_tiles")
      assert.strictEqual(scratchBytes(few, unsplit), 0)
      const two = kernelFor(prefill, { ...h200, attentionPrefill: { splits: 2 } })!
      assert.strictEqual(two.variant.splits, 2)
      assert.strictEqual(two.next?.variant.splits, 2)
      // a split walks its own whole blocks of keys and leaves its partials unweighed, the sink to the merge
      assert.include(two.main, "let j_first = sp * j_per;")
      assert.include(two.main, "for (var j0 = j_first; j0 < j_end;")
      assert.notInclude(two.main, "1.0 / l")
      // too few keys to split (2 blocks): 64 query rows a workgroup, unsplit
      const brief = yield* attention(64, 64)
      assert.strictEqual(chosen(brief, h200), "flash_attn_tiles")
      assert.strictEqual(kernelFor(brief, h200)!.variant.subgroups, 4)
      assert.strictEqual(scratchBytes(brief, h200), 0)
      // K, V, S and P rows spread over the banks where their padding fits the workgroup memory, else packed
      assert.strictEqual(kernelFor(prefill, h200)!.variant.spread, true)
      assert.strictEqual(kernelFor(prefill, { ...h200, attentionPrefill: { spread: false } })!.variant.spread, false)
      // a skipped block waits for the flag's clearing before the next block can set it (no test can time the
      // race: lavapipe has no subgroup matrices)
      const wgsl = kernelFor(prefill, h200)!.main
      const skip = wgsl.slice(
        wgsl.indexOf("if (go == 0u) {"),
        wgsl.indexOf("continue;", wgsl.indexOf("if (go == 0u) {"))
      )
      assert.match(skip, /workgroupBarrier\(\);\s*$/)
      // the mask's words, as K's and V's, loaded a block ahead unless the prefetch is off
      assert.include(kernelFor(prefill, h200)!.main, "let mk = mkn;")
      assert.notInclude(kernelFor(prefill, { ...h200, attentionPrefill: { prefetch: false } })!.main, "mkn")
      const tight = kernelFor(yield* attention(2048), { ...h200, workgroupStorage: 44000 })!
      assert.deepInclude(tight.variant, { family: "flash_attn_tiles", subgroups: 8, spread: false })
      assert.strictEqual(chosen(prefill, { ...h200, attentionPrefill: { form: "two-pass" } }), "flash_attn_mma")
      assert.strictEqual(chosen(yield* attention(512, 300), h200), "flash_attn_mma")
      assert.strictEqual(scratchBytes(yield* attention(512, 300), h200), 0)
      assert.strictEqual(chosen(prefill, { ...h200, subgroupMatrix: false }), "flash_attn")
      // heads past 128 (or memory short of the tiles) take the row form
      assert.strictEqual(chosen(yield* attention(512, 4096, 256), h200), "flash_attn")
      assert.strictEqual(chosen(prefill, { ...h200, workgroupStorage: 24576 }), "flash_attn")
      // the one-pass form's tiles fit where the two-pass form's do not: the row form is its fallback
      const small = kernelFor(prefill, { ...h200, workgroupStorage: 32768 })!
      assert.strictEqual(small.variant.family, "flash_attn_tiles")
      assert.strictEqual(small.fallback?.variant.family, "flash_attn")
    }))
})
