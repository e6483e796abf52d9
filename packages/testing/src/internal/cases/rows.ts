/**
 * Row cases: soft_max (plain, long rows, masks, ALiBi, rows that fill a workgroup), rms_norm and norm
 * (odd, long, full, very long, permuted rows), and rope in both modes (whole rows, partial rotation, a
 * permuted source).
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as Ops from "@effect-gpu/core/Ops"
import type { Case, Row } from "./case.js"
import { table, THRESHOLD } from "./case.js"

const softMax = (dt: DType.DType): ReadonlyArray<Row> => [
  ["", [{ dtype: dt, ne: [37, 5, 2] }], ([a]) => Ops.softMax(a)],
  // rows longer than a GPU kernel keeps in registers
  ["row_4500", [{ dtype: dt, ne: [4500, 2] }], ([a]) => Ops.softMax(a, { scale: 2 })],
  [
    "mask_scale",
    [{ dtype: dt, ne: [37, 5, 2, 1] }, { dtype: dt, ne: [37, 5, 1, 1] }],
    ([a, m]) => Ops.softMax(a, { mask: m, scale: 0.3 })
  ],
  [
    "alibi",
    [{ dtype: dt, ne: [300, 3, 4] }, { dtype: dt, ne: [300, 4, 1, 1] }],
    ([a, m]) => Ops.softMax(a, { mask: m, scale: 0.5, maxBias: 8 })
  ],
  // rows that fill every thread of a GPU workgroup (kernels drop their bounds guards)
  [
    "mask_full_rows",
    [{ dtype: dt, ne: [512, 3, 2, 1] }, { dtype: dt, ne: [512, 3, 1, 1] }],
    ([a, m]) => Ops.softMax(a, { mask: m, scale: 0.7 })
  ]
]

const norms = (dt: DType.DType, norm: typeof Ops.rmsNorm): ReadonlyArray<Row> => [
  ["odd", [{ dtype: dt, ne: [37, 5, 2] }], ([a]) => norm(a, 1e-5)],
  ["long", [{ dtype: dt, ne: [300, 3] }], ([a]) => norm(a, 1e-5)],
  ["full_rows", [{ dtype: dt, ne: [512, 3] }], ([a]) => norm(a, 1e-5)],
  ["row_4500", [{ dtype: dt, ne: [4500, 2] }], ([a]) => norm(a, 1e-5)],
  ["permuted", [{ dtype: dt, ne: [37, 2, 5] }], ([a]) => norm(Ops.permute(a, [0, 2, 1, 3]), 1e-5)]
]

const rope = (dt: DType.DType, mode: 0 | 2): ReadonlyArray<Row> => [
  [
    "full",
    [{ dtype: dt, ne: [16, 3, 5] }, { dtype: "i32", ne: [5], index: 64 }],
    ([a, p]) => Ops.rope(a, p, { nDims: 16, mode })
  ],
  [
    "partial",
    [{ dtype: dt, ne: [32, 2, 4] }, { dtype: "i32", ne: [4], index: 100 }],
    ([a, p]) => Ops.rope(a, p, { nDims: 8, mode, freqBase: 500, freqScale: 0.5 })
  ],
  [
    "permuted",
    [{ dtype: dt, ne: [18, 5, 3] }, { dtype: "i32", ne: [5], index: 50 }],
    ([a, p]) => Ops.rope(Ops.permute(a, [0, 2, 1, 3]), p, { nDims: 12, mode })
  ]
]

/** @internal */
export const cases = (dt: DType.DType): Array<Case> => [
  // the plain case is named soft_max_<dt>, without a suffix
  ...table(`soft_max_${dt}`, "soft_max", softMax(dt), THRESHOLD.softMax).map((c) =>
    c.name.endsWith("_") ? { ...c, name: c.name.slice(0, -1) } : c
  ),
  ...table(`rms_norm_${dt}`, "rms_norm", norms(dt, Ops.rmsNorm)),
  ...table(`norm_${dt}`, "norm", norms(dt, Ops.normalize)),
  ...table(`rope_normal_${dt}`, "rope", rope(dt, 0), THRESHOLD.softMax),
  ...table(`rope_neox_${dt}`, "rope", rope(dt, 2), THRESHOLD.softMax)
]
