/**
 * Row cases: soft_max (plain, long rows, masks, ALiBi, sinks, rows that fill a workgroup), rms_norm, norm
 * and l2_norm (odd, long, full, very long, permuted rows), group_norm (even and ragged groups), and rope
 * in every mode (whole rows, partial rotation, a permuted source, frequency factors, YaRN, sections).
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
  // sinks join each row's max and sum: with a mask, and alone on rows a GPU keeps in registers and not
  [
    "mask_sinks",
    [{ dtype: dt, ne: [37, 5, 4, 1] }, { dtype: dt, ne: [37, 5, 1, 1] }, { dtype: "f32", ne: [4] }],
    ([a, m, s]) => Ops.softMax(a, { mask: m, sinks: s, scale: 0.3 })
  ],
  [
    "sinks_long",
    [{ dtype: dt, ne: [4500, 2, 3] }, { dtype: "f32", ne: [3] }],
    ([a, s]) => Ops.softMax(a, { sinks: s })
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

/** rope's extensions: frequency factors, YaRN, and the multi-section modes (four positions per token) */
const ropeExt = (dt: DType.DType): ReadonlyArray<Row> => [
  [
    "freq_factors",
    [{ dtype: dt, ne: [32, 3, 5] }, { dtype: "i32", ne: [5], index: 200 }, { dtype: "f32", ne: [12], positive: true }],
    ([a, p, f]) => Ops.rope(a, p, { nDims: 24, mode: 0, freqBase: 500000, freqFactors: f })
  ],
  [
    "neox_yarn",
    [{ dtype: dt, ne: [32, 3, 5] }, { dtype: "i32", ne: [5], index: 3000 }],
    ([a, p]) => Ops.rope(a, p, { nDims: 32, mode: 2, freqScale: 0.25, extFactor: 1, attnFactor: 0.9, nCtxOrig: 4096 })
  ],
  [
    "mrope",
    [{ dtype: dt, ne: [40, 3, 5] }, { dtype: "i32", ne: [20], index: 100 }],
    ([a, p]) => Ops.rope(a, p, { nDims: 32, mode: 8, sections: [6, 5, 5, 0] })
  ],
  [
    "imrope_permuted",
    [{ dtype: dt, ne: [32, 5, 3] }, { dtype: "i32", ne: [20], index: 100 }],
    ([a, p]) => Ops.rope(Ops.permute(a, [0, 2, 1, 3]), p, { nDims: 32, mode: 40, sections: [6, 5, 5, 0] })
  ]
]

const l2Norm = (dt: DType.DType): ReadonlyArray<Row> => [
  ["odd", [{ dtype: dt, ne: [37, 5, 2] }], ([a]) => Ops.l2Norm(a, 1e-6)],
  ["long", [{ dtype: dt, ne: [4500, 2] }], ([a]) => Ops.l2Norm(a, 1e-6)],
  ["permuted", [{ dtype: dt, ne: [37, 2, 5] }], ([a]) => Ops.l2Norm(Ops.permute(a, [0, 2, 1, 3]), 1e-6)]
]

const groupNorm = (dt: DType.DType): ReadonlyArray<Row> => [
  ["even", [{ dtype: dt, ne: [8, 6, 16, 2] }], ([a]) => Ops.groupNorm(a, 4, 1e-6)],
  // 7 channels in groups of 3: the last group has one
  ["ragged", [{ dtype: dt, ne: [5, 3, 7, 2] }], ([a]) => Ops.groupNorm(a, 3, 1e-6)],
  ["large", [{ dtype: dt, ne: [64, 40, 4] }], ([a]) => Ops.groupNorm(a, 2, 1e-6)]
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
  ...table(`rope_neox_${dt}`, "rope", rope(dt, 2), THRESHOLD.softMax),
  ...table(`rope_${dt}`, "rope", ropeExt(dt), THRESHOLD.softMax),
  ...table(`l2_norm_${dt}`, "l2_norm", l2Norm(dt)),
  ...table(`group_norm_${dt}`, "group_norm", groupNorm(dt))
]
