/**
 * flash_attn_ext cases, with k and v of each float type: decode with grouped-query heads, a causal
 * prefill (masked keys at -inf, mask rows padded past n_q), more keys than a kernel's block with ALiBi and
 * a soft cap, sinks without a mask and a value size unlike the key's, a permuted view of q, and batches
 * that the KV and the mask broadcast over.
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as Ops from "@effect-gpu/core/Ops"
import type { Case, Row } from "./case.js"
import { table, THRESHOLD } from "./case.js"

/** a causal mask of n_kv columns and `rows` rows: query i sees the keys up to n_kv - n_q + i */
const causal = (nKv: number, nQ: number, rows: number): ReadonlyArray<number> =>
  Array.from({ length: nKv * rows }, (_, k) => (k % nKv <= nKv - nQ + Math.floor(k / nKv) ? 0 : -Infinity))

const rows = (dt: DType.DType): ReadonlyArray<Row> => {
  const qkv = (D: number, nQ: number, H: number, nKv: number, Hkv: number, Dv = D, B = 1) => [
    { dtype: "f32" as const, ne: [D, nQ, H, B] },
    { dtype: dt, ne: [D, nKv, Hkv, B] },
    { dtype: dt, ne: [Dv, nKv, Hkv, B] }
  ]
  return [
    [
      "decode_gqa",
      [...qkv(64, 1, 8, 37, 2), { dtype: dt, ne: [37, 1] }],
      ([q, k, v, m]) => Ops.flashAttnExt(q, k, v, { scale: 0.125, mask: m })
    ],
    [
      "prefill_causal",
      [...qkv(64, 7, 4, 45, 4), { dtype: dt, ne: [45, 8], values: causal(45, 7, 8) }],
      ([q, k, v, m]) => Ops.flashAttnExt(q, k, v, { scale: 0.125, mask: m })
    ],
    [
      "long_alibi_softcap",
      [...qkv(32, 5, 6, 150, 3), { dtype: dt, ne: [150, 5] }],
      ([q, k, v, m]) => Ops.flashAttnExt(q, k, v, { scale: 0.2, mask: m, maxBias: 8, logitSoftcap: 20 })
    ],
    [
      "sinks_dv",
      [...qkv(48, 3, 4, 33, 1, 40), { dtype: "f32", ne: [4] }],
      ([q, k, v, s]) => Ops.flashAttnExt(q, k, v, { scale: 0.15, sinks: s })
    ],
    [
      "permuted_q",
      [{ dtype: "f32", ne: [32, 4, 5] }, { dtype: dt, ne: [32, 20, 2] }, { dtype: dt, ne: [32, 20, 2] }],
      ([q, k, v]) => Ops.flashAttnExt(Ops.permute(q, [0, 2, 1, 3]), k, v, { scale: 0.2 })
    ],
    [
      "batched",
      [...qkv(32, 3, 4, 20, 2, 32, 2), { dtype: dt, ne: [20, 3, 1, 2] }],
      ([q, k, v, m]) => Ops.flashAttnExt(q, k, v, { scale: 0.2, mask: m })
    ]
  ]
}

/** @internal */
export const cases = (dt: DType.DType): Array<Case> =>
  table(`flash_attn_ext_${dt}`, "flash_attn_ext", rows(dt), THRESHOLD.softMax)
