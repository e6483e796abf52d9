/**
 * Attention's kernels on the adapter at hand, each form forced once and matched against the CPU: keys
 * rotated as they are stored (rope_set_rows), flash attention's decode, subgroup-matrix and row forms, and
 * q rotated as attention reads it (rope_flash_attn_ext).
 */
import { Fusion, Graph, Ops } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { adapterAvailable, nmse, onDeviceAndCpu } from "./utils.js"

describe.skipIf(!adapterAvailable)("WebGPU attention kernel variants", () => {
  // rope stored by set_rows in one dispatch (rope_set_rows), normal and neox, with frequency factors once,
  // and with the values' set_rows at the same indices in the same dispatch (rope_set_rows_kv: rows of an odd
  // width, f32 into an f16 table) unless the device is asked to keep it apart: the caches after it against
  // the CPU's unfused graph
  it.scoped(
    "keys rotated as they are stored (rope_set_rows, with the values: rope_set_rows_kv) match the CPU's rope then set_rows",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        const [apart] = yield* WebGpu.make({ devices: 1, storeValuesWithKeys: false })
        for (const [mode, factors, device] of [[0, false, d], [2, true, d], [0, false, apart]] as const) {
          const g = Graph.make()
          const cache = yield* g.param("cache", "f16", [128, 9])
          const values = yield* g.param("values", "f16", [75, 9])
          const k = yield* g.input("k", "f32", [64, 2, 3])
          const v = yield* g.input("v", "f32", [75, 3])
          const pos = yield* g.input("pos", "i32", [3])
          const rows = yield* g.input("rows", "i32", [3])
          const f = factors ? yield* g.param("f", "f32", [16]) : undefined
          const r = Ops.rope(k, pos, { nDims: 32, mode, freqBase: 10000, ...(f ? { freqFactors: f } : {}) })
          const y = yield* g.output(Ops.scale(Ops.setRows(cache, Ops.reshape(r, [128, 3]), rows), 1))
          const yv = yield* g.output(Ops.scale(Ops.setRows(values, v, rows), 1))
          const graph = g.build()
          const backend = yield* device.makeBackend()
          const fused = backend.optimize(graph)
          const kv = device === d
          assert.include(fused.nodes.map((n) => n.op._tag), kv ? "RopeSetRowsKv" : "RopeSetRows")
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(device, fused, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(cache, Generators.values(1, 128 * 9))
              yield* plan.set(values, Generators.values(4, 75 * 9))
              yield* plan.set(k, Generators.values(2, 64 * 2 * 3))
              yield* plan.set(v, Generators.values(5, 75 * 3))
              yield* plan.set(pos, Int32Array.from([3, 100, 7]))
              yield* plan.set(rows, Int32Array.from([8, 2, 5]))
              if (f) yield* plan.set(f, Generators.values(3, 16).map((x) => 1 + Math.abs(x)))
            }), [y, yv])
          const ops = entries.map((e) => e.op)
          if (kv) assert.deepStrictEqual(ops.filter((o) => o.includes("set_rows")), ["rope_set_rows_kv"])
          else assert.sameMembers(ops.filter((o) => o.includes("set_rows")), ["rope_set_rows", "set_rows"])
          assert.isBelow(nmse(gpu, cpu), 1e-7, `mode ${mode}`)
        }
      }),
    120_000
  )

  // flash attention's forms, each forced once against the CPU: the decode form (few query rows, where the
  // device has subgroups) with K and V read four values per load, the scores' lanes across the keys (the
  // default there) or across the head dimension, and the keys split over workgroups (then merged by a second
  // dispatch: a lane a split up to a subgroup's lanes, else fewer splits than the merge reads at a time, and
  // more with a remainder), its scalar form (a head size not a multiple of 4) in one split, the mask shared by
  // the heads or one a head, the subgroup-matrix form for more rows (a tail of rows past its 64, where the
  // device has the matrices), and the row form everywhere else
  const decodeFamilies = ["flash_attn_decode", "flash_attn_merge"] as const
  const attentionForms = [
    // a key a lane (keyLanes 1); the other keys forms take four lanes a key (the default)
    {
      nQ: 1,
      D: 64,
      splits: 3,
      sinks: true,
      families: decodeFamilies,
      wide: true,
      maskHeads: 1,
      across: "keys",
      keyLanes: 1
    },
    { nQ: 2, D: 64, splits: 11, sinks: false, families: decodeFamilies, wide: true, maskHeads: 4, across: "keys" },
    // a block's V rows loaded after the scores (valuesAhead off; the other keys forms load them with its K rows)
    {
      nQ: 1,
      D: 64,
      splits: 5,
      sinks: true,
      families: decodeFamilies,
      wide: true,
      maskHeads: 4,
      across: "keys",
      valuesAhead: false
    },
    // a workgroup a query head (each KV head's two read by two workgroups)
    {
      nQ: 1,
      D: 64,
      splits: 4,
      sinks: false,
      families: decodeFamilies,
      wide: true,
      maskHeads: 1,
      across: "keys",
      heads: 1
    },
    {
      nQ: 2,
      D: 64,
      splits: 5,
      sinks: true,
      families: decodeFamilies,
      wide: true,
      maskHeads: 4,
      across: "dims",
      heads: 1
    },
    // the keys in one split over 32 subgroups, no merge (a short context's decode in one dispatch; at a 1B
    // model's head size: at 128 its partials take more than 32 KiB of workgroup memory)
    {
      nQ: 1,
      D: 64,
      splits: 1,
      sinks: true,
      families: ["flash_attn_decode"],
      wide: true,
      maskHeads: 1,
      across: "keys",
      subgroups: 32
    },
    // more splits than the merge's 64 threads (70 of 300 keys: 5 keys a split)
    { nQ: 2, D: 64, splits: 70, sinks: true, families: decodeFamilies, wide: true, maskHeads: 4, across: "dims" },
    {
      nQ: 3,
      D: 62,
      splits: 1,
      sinks: false,
      families: ["flash_attn_decode"],
      wide: false,
      maskHeads: 1,
      across: "dims"
    },
    {
      nQ: 9,
      D: 64,
      splits: 1,
      sinks: true,
      families: ["flash_attn_mma"],
      wide: undefined,
      maskHeads: 1,
      across: undefined
    },
    {
      nQ: 70,
      D: 48,
      splits: 1,
      sinks: false,
      families: ["flash_attn_mma"],
      wide: undefined,
      maskHeads: 1,
      across: undefined
    },
    // 304 keys: the mask's rows load 8 f16 at a time, so the one-pass form runs (300 above: the two-pass one),
    // its keys in 2 splits (a workgroup a head: too few to fill the GPU) merged with the sinks after
    {
      nQ: 70,
      D: 64,
      keys: 304,
      splits: 1,
      sinks: true,
      families: ["flash_attn_tiles", "flash_attn_merge"],
      wide: undefined,
      maskHeads: 1,
      across: undefined
    },
    {
      nQ: 9,
      D: 62,
      splits: 1,
      sinks: false,
      families: ["flash_attn"],
      wide: undefined,
      maskHeads: 1,
      across: undefined
    }
  ] as const
  for (const form of attentionForms) {
    it.scoped(
      `flash attention: ${form.families.join(" + ")} (${form.nQ} rows, D ${form.D}, ${form.splits} splits, mask ` +
        `over ${form.maskHeads} heads${form.across ? `, lanes across ${form.across}` : ""}${
          "heads" in form ? `, ${form.heads} head a workgroup` : ""
        }${"subgroups" in form ? `, ${form.subgroups} subgroups` : ""}${
          "keyLanes" in form ? `, ${form.keyLanes} lane a key` : ""
        }${"valuesAhead" in form ? ", V rows after the scores" : ""}) matches the CPU`,
      () =>
        Effect.gen(function*() {
          const forced = {
            splits: form.splits,
            ...(form.across !== undefined ? { across: form.across } : {}),
            ...("heads" in form ? { heads: form.heads } : {}),
            ...("subgroups" in form ? { subgroups: form.subgroups } : {}),
            ...("keyLanes" in form ? { keyLanes: form.keyLanes } : {}),
            ...("valuesAhead" in form ? { valuesAhead: form.valuesAhead } : {})
          }
          const [d] = yield* WebGpu.make({ devices: 1, attentionDecode: forced })
          // without subgroups the decode form is not offered: the row form runs
          const matrices = form.families[0] === "flash_attn_mma" || form.families[0] === "flash_attn_tiles"
          const offered = matrices
            ? WebGpuDevice.hasSubgroupMatrices(d)
            : d.description.includes("subgroups")
          const families = offered ? [...form.families] : ["flash_attn"]
          const { D, nQ } = form
          const nKv = "keys" in form ? form.keys : 300
          const g = Graph.make()
          const q = yield* g.input("q", "f32", [D, nQ, 4])
          const k = yield* g.input("k", "f16", [D, nKv, 2])
          const v = yield* g.input("v", "f16", [D, nKv, 2])
          const mask = yield* g.input("mask", "f16", [nKv, nQ + 2, form.maskHeads])
          const sinks = form.sinks ? yield* g.input("sinks", "f32", [4]) : undefined
          const y = yield* g.output(Ops.flashAttnExt(q, k, v, { scale: 1 / Math.sqrt(D), mask, sinks }))
          const inputs = [q, k, v, mask, ...(sinks ? [sinks] : [])]
          const graph = g.build()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
            Effect.forEach(inputs, (t, i) => {
              const values = Generators.values(
                20 + i,
                t.ne.reduce((x, n) =>
                  x * n, 1)
              )
              // the mask hides every fifth key
              return plan.set(
                t,
                t === mask
                  ? values.map((x, j) =>
                    j % 5 === 0 ? -Infinity : x
                  )
                  : values
              )
            }, { discard: true }), [y])
          assert.deepStrictEqual(
            entries.map((e) =>
              e.variant?.family
            ),
            families
          )
          if (families[0] === "flash_attn_decode") {
            assert.strictEqual(entries[0].variant?.wide, form.wide, entries[0].kernel)
            assert.strictEqual(entries[0].variant?.across, form.across, entries[0].kernel)
            assert.strictEqual(entries[0].variant?.mask, form.maskHeads === 1 ? "shared" : "per-head")
            // unforced, a software adapter's workgroups take every head of a KV head (2); a GPU's too where
            // that still gives it 256 workgroups (rows x 2 KV heads x splits), else one
            const fills = form.nQ * 2 * form.splits >= 256
            const heads = "heads" in form ? form.heads : WebGpuDevice.isSoftware(d) || fills ? 2 : 1
            assert.strictEqual(entries[0].variant?.heads, heads, entries[0].kernel)
            if ("subgroups" in form) {
              assert.strictEqual(entries[0].variant?.subgroups, form.subgroups, entries[0].kernel)
            }
            const keyLanes = form.across === "keys" ? ("keyLanes" in form ? form.keyLanes : 4) : 1
            assert.strictEqual(entries[0].variant?.keyLanes ?? 1, keyLanes, entries[0].kernel)
            const ahead = form.across === "keys" && !("valuesAhead" in form) ? true : undefined
            assert.strictEqual(entries[0].variant?.valuesAhead, ahead, entries[0].kernel)
          }
          // up to a subgroup's lanes of splits merged a lane a split, more by the workgroup's reductions
          if (families[0] === "flash_attn_decode" && families.includes("flash_attn_merge")) {
            const lanes = entries[0].variant?.lanes
            assert.strictEqual(entries[1].variant?.lanes, form.splits <= Number(lanes) ? lanes : undefined)
          }
          // the matrix form rounds Q and P to f16, as ggml's GPU kernels do
          assert.isBelow(nmse(gpu, cpu), matrices && offered ? 1e-5 : 1e-6)
        }),
      60_000
    )
  }

  // q rotated as attention reads it (rope_flash_attn_ext), in each form that takes it: the decode form with
  // the scores' lanes across the keys and across the head dimension (the device fuses where these run), and
  // the row form (more query rows than the decode form takes; fused here by asking Fusion directly); modes
  // 0 and 2, all of a row rotated or its first 48 values, frequency factors and YaRN once; q a view of a
  // wider row (as a stacked q, k and v give it), grouped KV heads, a mask
  const ropeForms = [
    { across: "keys", nQ: 1, mode: 0, nDims: 64, factors: false, yarn: false, family: "flash_attn_decode" },
    { across: "dims", nQ: 2, mode: 2, nDims: 48, factors: true, yarn: true, family: "flash_attn_decode" },
    { across: undefined, nQ: 9, mode: 2, nDims: 64, factors: false, yarn: false, family: "flash_attn" }
  ] as const
  for (const form of ropeForms) {
    it.scoped(
      `q rotated by its attention (${form.family}${form.across ? `, lanes across ${form.across}` : ""}, mode ` +
        `${form.mode}, ${form.nQ} rows) matches the CPU's rope, permute and flash_attn_ext`,
      () =>
        Effect.gen(function*() {
          const [d] = yield* WebGpu.make({
            devices: 1,
            attentionDecode: { splits: 3, ...(form.across ? { across: form.across } : {}) }
          })
          const subgroups = d.description.includes("subgroups")
          const { nQ } = form
          const D = 64
          const nKv = 200
          const g = Graph.make()
          const qkv = yield* g.input("qkv", "f32", [D * 4 + 32, nQ])
          const k = yield* g.input("k", "f16", [D, nKv, 2])
          const v = yield* g.input("v", "f16", [D, nKv, 2])
          const pos = yield* g.input("pos", "i32", [nQ])
          const mask = yield* g.input("mask", "f16", [nKv, nQ])
          const f = form.factors ? yield* g.param("f", "f32", [form.nDims / 2]) : undefined
          const q = Ops.view(qkv, [D, 4, nQ], [D * 4, qkv.nb[1]], 0)
          const r = Ops.rope(q, pos, {
            nDims: form.nDims,
            mode: form.mode,
            freqBase: 10000,
            ...(f ? { freqFactors: f } : {}),
            ...(form.yarn ? { extFactor: 1, freqScale: 0.25, nCtxOrig: 512, attnFactor: 1 } : {})
          })
          const y = yield* g.output(Ops.flashAttnExt(Ops.permute(r, [0, 2, 1, 3]), k, v, { scale: 0.125, mask }))
          const graph = g.build()
          const backend = yield* d.makeBackend()
          const fused = form.family === "flash_attn"
            ? Fusion.optimize(graph, { ropeAttention: () => true })
            : backend.optimize(graph)
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, fused, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(qkv, Generators.values(1, (D * 4 + 32) * nQ))
              yield* plan.set(k, Generators.values(2, D * nKv * 2))
              yield* plan.set(v, Generators.values(3, D * nKv * 2))
              yield* plan.set(pos, Int32Array.from({ length: nQ }, (_, i) => 37 * i + 5))
              yield* plan.set(mask, Generators.values(4, nKv * nQ).map((x, j) => (j % 7 === 0 ? -Infinity : x)))
              if (f) yield* plan.set(f, Generators.values(5, form.nDims / 2).map((x) => 1 + Math.abs(x)))
            }), [y])
          // without subgroups the decode form is not offered and the device does not fuse
          const want = subgroups || form.family === "flash_attn" ? "rope_flash_attn_ext" : "flash_attn_ext"
          assert.include(entries.map((e) => e.op), want)
          const own = entries.find((e) => e.op === want)!
          if (want === "rope_flash_attn_ext") {
            assert.strictEqual(own.variant?.family, subgroups ? form.family : "flash_attn", own.kernel)
            assert.strictEqual(own.variant?.rope, form.mode, own.kernel)
            if (subgroups && form.across) assert.strictEqual(own.variant?.across, form.across, own.kernel)
          }
          assert.isBelow(nmse(gpu, cpu), 1e-6)
        }),
      60_000
    )
  }
})
