/**
 * The conformance suite: every op of the core set, for each dtype a backend offers, on at least three
 * shapes (odd sizes, permuted or offset views, broadcasting), computed on the backend under test and on
 * the CPU reference from the same seeded, non-zero inputs, and compared with ggml's NMSE thresholds.
 * Every tensor sits between sentinel bytes that must survive the compute (out-of-bounds writes), and
 * outputs are poisoned (NaN, -1) before each run so an element a kernel forgot to write is caught.
 *
 * @since 0.1.0
 */
import type { Backend } from "@effect-gpu/core/Backend"
import type { Buffer } from "@effect-gpu/core/Buffer"
import * as Cpu from "@effect-gpu/core/Cpu"
import * as DType from "@effect-gpu/core/DType"
import type { AllocationError, BackendError, OutOfBounds, ShapeError, UnsupportedOp } from "@effect-gpu/core/GpuError"
import * as Graph from "@effect-gpu/core/Graph"
import * as Op from "@effect-gpu/core/Op"
import * as Ops from "@effect-gpu/core/Ops"
import type { Binding } from "@effect-gpu/core/Plan"
import type { Tensor } from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Compare from "./Compare.js"
import * as Gen from "./Generators.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Input {
  readonly dtype: DType.DType
  readonly ne: ReadonlyArray<number>
  /** positive values only (sqrt, log, divisors) */
  readonly positive?: boolean
  /** i32 data: integers in [0, index) */
  readonly index?: number
  /** i32 data: distinct integers in [0, distinct) (set_rows) */
  readonly distinct?: number
  /** fixed values */
  readonly values?: ReadonlyArray<number>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Case {
  readonly name: string
  /** the op under test (ggml's name) */
  readonly op: string
  readonly inputs: ReadonlyArray<Input>
  readonly build: (ts: ReadonlyArray<Tensor>) => Effect.Effect<Tensor, ShapeError>
  readonly compare: Compare.Rule
  readonly nmse: number
}

const THRESHOLD = { default: 1e-7, mulMat: 5e-4, softMax: 1e-6, f16: 1e-6 }

const floatTypes = (f16: boolean): ReadonlyArray<DType.DType> => f16 ? ["f32", "f16"] : ["f32"]

const threshold = (base: number, dtypes: ReadonlyArray<DType.DType>) =>
  dtypes.includes("f16") ? Math.max(base, THRESHOLD.f16) : base

const mk = (
  name: string,
  op: string,
  inputs: ReadonlyArray<Input>,
  build: (ts: ReadonlyArray<Tensor>) => Effect.Effect<Tensor, ShapeError>,
  base = THRESHOLD.default,
  compare: Case["compare"] = "nmse"
): Case => ({ name, op, inputs, build, compare, nmse: threshold(base, inputs.map((i) => i.dtype)) })

/** the three shapes of an element-wise case: odd, a permuted view, and a long odd row */
const unaryShapes = (dt: DType.DType, positive = false) =>
  [
    { tag: "odd", input: { dtype: dt, ne: [5, 7, 3, 2], positive }, view: (t: Tensor) => Effect.succeed(t) },
    {
      tag: "permuted",
      input: { dtype: dt, ne: [7, 5, 3, 2], positive },
      view: (t: Tensor) => Ops.permute(t, [1, 0, 2, 3])
    },
    { tag: "aligned", input: { dtype: dt, ne: [64, 3], positive }, view: (t: Tensor) => Effect.succeed(t) },
    {
      tag: "offset-view",
      input: { dtype: dt, ne: [131, 3], positive },
      view: (t: Tensor) => Ops.view(t, [129, 3], [131 * DType.typeSize(dt)], 2 * DType.typeSize(dt))
    }
  ] as const

/**
 * The cases, for a backend that does (or does not) offer f16.
 *
 * @since 0.1.0
 * @category constructors
 */
export const cases = (options: { readonly f16: boolean }): ReadonlyArray<Case> => {
  const out: Array<Case> = []
  const fts = floatTypes(options.f16)
  const unary: ReadonlyArray<[string, (t: Tensor) => Effect.Effect<Tensor, ShapeError>, boolean]> = [
    ["scale", (t) => Ops.scale(t, 0.37), false],
    ["sqr", Ops.sqr, false],
    ["sqrt", Ops.sqrt, true],
    ["exp", Ops.exp, false],
    ["log", Ops.log, true],
    ["clamp", (t) => Ops.clamp(t, -0.5, 0.75), false],
    ["relu", Ops.relu, false],
    ["gelu", Ops.gelu, false],
    ["gelu_quick", Ops.geluQuick, false],
    ["silu", Ops.silu, false],
    ["tanh", Ops.tanh, false],
    ["sigmoid", Ops.sigmoid, false],
    ["neg", Ops.neg, false],
    ["abs", Ops.abs, false],
    ["cont", Ops.cont, false],
    ["dup", Ops.dup, false]
  ]
  for (const dt of fts) {
    for (const [name, f, positive] of unary) {
      for (const s of unaryShapes(dt, positive)) {
        out.push(mk(`${name}_${dt}_${s.tag}`, name, [s.input], ([a]) => Effect.flatMap(s.view(a), f)))
      }
    }
    for (const [name, f] of [["add", Ops.add], ["sub", Ops.sub], ["mul", Ops.mul], ["div", Ops.div]] as const) {
      const pos = name === "div"
      out.push(
        mk(`${name}_${dt}_same`, name, [{ dtype: dt, ne: [5, 7, 3, 2] }, {
          dtype: dt,
          ne: [5, 7, 3, 2],
          positive: pos
        }], ([a, b]) => f(a, b))
      )
      out.push(
        mk(`${name}_${dt}_bcast`, name, [{ dtype: dt, ne: [5, 7, 3, 2] }, {
          dtype: dt,
          ne: [5, 1, 3, 1],
          positive: pos
        }], ([a, b]) => f(a, b))
      )
      out.push(
        mk(`${name}_${dt}_aligned`, name, [{ dtype: dt, ne: [8, 7, 3, 2] }, {
          dtype: dt,
          ne: [8, 7, 3, 2],
          positive: pos
        }], ([a, b]) => f(a, b))
      )
      out.push(
        mk(
          `${name}_${dt}_row`,
          name,
          [{ dtype: dt, ne: [8, 7, 3, 2] }, { dtype: dt, ne: [8], positive: pos }],
          ([a, b]) => f(a, b)
        )
      )
      out.push(
        mk(
          `${name}_${dt}_permuted_bcast`,
          name,
          [{ dtype: dt, ne: [7, 5, 3, 2] }, { dtype: dt, ne: [1, 7, 1, 2], positive: pos }],
          ([a, b]) => f(Ops.permute(a, [1, 0, 2, 3]), b)
        )
      )
    }
    for (const to of fts) {
      for (const s of unaryShapes(dt)) {
        out.push(mk(`cpy_${dt}_to_${to}_${s.tag}`, "cpy", [s.input], ([a]) => Ops.cpy(s.view(a), to)))
      }
    }
    // mul_mat: matrix-vector, tiled with batch broadcast, a permuted and a transposed src1
    const thr = THRESHOLD.mulMat
    out.push(
      mk(
        `mul_mat_${dt}_vec`,
        "mul_mat",
        [{ dtype: dt, ne: [37, 19] }, { dtype: "f32", ne: [37, 5] }],
        ([a, b]) => Ops.mulMat(a, b),
        thr
      )
    )
    // rows shorter than a workgroup share one: one thread per row (K 3, batches broadcast), 16 threads
    // per row with 8 columns and a last workgroup that runs past the rows
    out.push(
      mk(
        `mul_mat_${dt}_vec_short_rows`,
        "mul_mat",
        [{ dtype: dt, ne: [3, 70, 2, 1] }, { dtype: "f32", ne: [3, 2, 4, 1] }],
        ([a, b]) => Ops.mulMat(a, b),
        thr
      )
    )
    out.push(
      mk(
        `mul_mat_${dt}_vec_shared_rows`,
        "mul_mat",
        [{ dtype: dt, ne: [300, 70] }, { dtype: "f32", ne: [300, 8] }],
        ([a, b]) => Ops.mulMat(a, b),
        thr
      )
    )
    // K-contiguous and 4-aligned: the vec4 matrix-vector kernel, with a K that is not a multiple of the
    // loads per pass, and a batch broadcast of a over b's batches
    out.push(
      mk(
        `mul_mat_${dt}_vec_aligned`,
        "mul_mat",
        [{ dtype: dt, ne: [1100, 19] }, { dtype: "f32", ne: [1100, 3] }],
        ([a, b]) => Ops.mulMat(a, b),
        thr
      )
    )
    out.push(
      mk(
        `mul_mat_${dt}_vec_bcast`,
        "mul_mat",
        [{ dtype: dt, ne: [1024, 17, 2, 1] }, { dtype: "f32", ne: [1024, 1, 4, 3] }],
        ([a, b]) => Ops.mulMat(a, b),
        thr
      )
    )
    out.push(
      mk(
        `mul_mat_${dt}_tiled_bcast`,
        "mul_mat",
        [{ dtype: dt, ne: [64, 33, 2, 1] }, { dtype: "f32", ne: [64, 45, 4, 3] }],
        ([a, b]) => Ops.mulMat(a, b),
        thr
      )
    )
    out.push(
      mk(
        `mul_mat_${dt}_large_edges`,
        "mul_mat",
        [{ dtype: dt, ne: [40, 130] }, { dtype: "f32", ne: [40, 135, 2] }],
        ([a, b]) => Ops.mulMat(a, b),
        thr
      )
    )
    out.push(
      mk(
        `mul_mat_${dt}_permuted_b`,
        "mul_mat",
        [{ dtype: dt, ne: [40, 21] }, { dtype: "f32", ne: [40, 3, 9] }],
        ([a, b]) => Ops.mulMat(a, Ops.permute(b, [0, 2, 1, 3])),
        thr
      )
    )
    out.push(
      mk(
        `mul_mat_${dt}_transposed_b`,
        "mul_mat",
        [{ dtype: dt, ne: [40, 70] }, { dtype: "f32", ne: [12, 40] }],
        ([a, b]) => Ops.mulMat(a, Ops.transpose(b)),
        thr
      )
    )
    if (dt === "f16") {
      // both operands f16: the subgroup-matrix (tensor core) kernel where the device has one. Ragged
      // edges in every dimension, a K that is not a multiple of the K step, an odd K (scalar loads), a
      // batch broadcast, a row-strided view of b
      const cases: Array<[string, ReadonlyArray<number>, ReadonlyArray<number>]> = [
        ["edges", [40, 130], [40, 135, 2]],
        ["deep", [200, 37], [200, 150]],
        ["odd_k", [37, 45], [37, 33]],
        ["bcast", [64, 33, 2, 1], [64, 45, 4, 3]]
      ]
      for (const [tag, a, b] of cases) {
        out.push(
          mk(
            `mul_mat_f16_f16_${tag}`,
            "mul_mat",
            [{ dtype: dt, ne: a }, { dtype: dt, ne: b }],
            ([x, y]) => Ops.mulMat(x, y),
            thr
          )
        )
      }
      out.push(
        mk(
          `mul_mat_f16_f16_strided_b`,
          "mul_mat",
          [{ dtype: dt, ne: [48, 70] }, { dtype: dt, ne: [52, 40] }],
          ([x, y]) => Ops.mulMat(x, Ops.view(y, [48, 40], [y.nb[1]], 4 * 2)),
          thr
        )
      )
    }
    // soft_max: plain, a broadcast mask with scale, ALiBi over 4 heads with a long row
    const sm = THRESHOLD.softMax
    out.push(mk(`soft_max_${dt}`, "soft_max", [{ dtype: dt, ne: [37, 5, 2] }], ([a]) => Ops.softMax(a), sm))
    // rows longer than a GPU kernel keeps in registers
    out.push(
      mk(
        `soft_max_${dt}_row_4500`,
        "soft_max",
        [{ dtype: dt, ne: [4500, 2] }],
        ([a]) => Ops.softMax(a, { scale: 2 }),
        sm
      )
    )
    out.push(
      mk(
        `soft_max_${dt}_mask_scale`,
        "soft_max",
        [{ dtype: dt, ne: [37, 5, 2, 1] }, { dtype: dt, ne: [37, 5, 1, 1] }],
        ([a, m]) => Ops.softMax(a, { mask: m, scale: 0.3 }),
        sm
      )
    )
    out.push(
      mk(
        `soft_max_${dt}_alibi`,
        "soft_max",
        [{ dtype: dt, ne: [300, 3, 4] }, { dtype: dt, ne: [300, 4, 1, 1] }],
        ([a, m]) => Ops.softMax(a, { mask: m, scale: 0.5, maxBias: 8 }),
        sm
      )
    )
    // rows that fill every thread of a GPU workgroup (kernels drop their bounds guards)
    out.push(
      mk(
        `soft_max_${dt}_mask_full_rows`,
        "soft_max",
        [{ dtype: dt, ne: [512, 3, 2, 1] }, { dtype: dt, ne: [512, 3, 1, 1] }],
        ([a, m]) => Ops.softMax(a, { mask: m, scale: 0.7 }),
        sm
      )
    )
    for (const [name, f] of [["rms_norm", Ops.rmsNorm], ["norm", Ops.normalize]] as const) {
      out.push(mk(`${name}_${dt}_odd`, name, [{ dtype: dt, ne: [37, 5, 2] }], ([a]) => f(a, 1e-5)))
      out.push(mk(`${name}_${dt}_long`, name, [{ dtype: dt, ne: [300, 3] }], ([a]) => f(a, 1e-5)))
      out.push(mk(`${name}_${dt}_full_rows`, name, [{ dtype: dt, ne: [512, 3] }], ([a]) => f(a, 1e-5)))
      out.push(mk(`${name}_${dt}_row_4500`, name, [{ dtype: dt, ne: [4500, 2] }], ([a]) => f(a, 1e-5)))
      out.push(
        mk(
          `${name}_${dt}_permuted`,
          name,
          [{ dtype: dt, ne: [37, 2, 5] }],
          ([a]) => f(Ops.permute(a, [0, 2, 1, 3]), 1e-5)
        )
      )
    }
    for (const mode of [0, 2] as const) {
      const r = `rope_${mode === 0 ? "normal" : "neox"}_${dt}`
      out.push(
        mk(
          `${r}_full`,
          "rope",
          [{ dtype: dt, ne: [16, 3, 5] }, { dtype: "i32", ne: [5], index: 64 }],
          ([a, p]) => Ops.rope(a, p, { nDims: 16, mode }),
          THRESHOLD.softMax
        )
      )
      out.push(
        mk(
          `${r}_partial`,
          "rope",
          [{ dtype: dt, ne: [32, 2, 4] }, { dtype: "i32", ne: [4], index: 100 }],
          ([a, p]) => Ops.rope(a, p, { nDims: 8, mode, freqBase: 500, freqScale: 0.5 }),
          THRESHOLD.softMax
        )
      )
      out.push(
        mk(
          `${r}_permuted`,
          "rope",
          [{ dtype: dt, ne: [18, 5, 3] }, { dtype: "i32", ne: [5], index: 50 }],
          ([a, p]) => Ops.rope(Ops.permute(a, [0, 2, 1, 3]), p, { nDims: 12, mode }),
          THRESHOLD.softMax
        )
      )
    }
    out.push(
      mk(
        `get_rows_${dt}_plain`,
        "get_rows",
        [{ dtype: dt, ne: [14, 11] }, { dtype: "i32", ne: [6], index: 11 }],
        ([a, i]) => Ops.getRows(a, i)
      )
    )
    out.push(
      mk(
        `get_rows_${dt}_batched`,
        "get_rows",
        [{ dtype: dt, ne: [9, 7, 2] }, { dtype: "i32", ne: [5, 2], index: 7 }],
        ([a, i]) => Ops.getRows(a, i)
      )
    )
    out.push(
      mk(
        `get_rows_${dt}_4d`,
        "get_rows",
        [{ dtype: dt, ne: [33, 4, 2, 2] }, { dtype: "i32", ne: [3, 2, 2], index: 4 }],
        ([a, i]) => Ops.getRows(a, i)
      )
    )
    out.push(
      mk(`set_rows_${dt}_plain`, "set_rows", [{ dtype: dt, ne: [14, 9] }, { dtype: "f32", ne: [14, 4] }, {
        dtype: "i32",
        ne: [4],
        distinct: 9
      }], ([d, s, i]) => Ops.setRows(d, s, i))
    )
    out.push(
      mk(
        `set_rows_${dt}_batched`,
        "set_rows",
        [{ dtype: dt, ne: [8, 6, 2] }, { dtype: "f32", ne: [8, 3, 2] }, { dtype: "i32", ne: [3, 1], distinct: 6 }],
        ([d, s, i]) => Ops.setRows(d, s, i)
      )
    )
    out.push(
      mk(`set_rows_${dt}_long`, "set_rows", [{ dtype: dt, ne: [33, 10] }, { dtype: "f32", ne: [33, 7] }, {
        dtype: "i32",
        ne: [7],
        distinct: 10
      }], ([d, s, i]) => Ops.setRows(d, s, i))
    )
    for (const dim of [0, 1, 2, 3]) {
      const bne = [7, 5, 2, 2].map((n, k) => (k === dim ? 3 : n))
      out.push(
        mk(
          `concat_${dt}_dim${dim}`,
          "concat",
          [{ dtype: dt, ne: [7, 5, 2, 2] }, { dtype: dt, ne: bne }],
          ([a, b]) => Ops.concat(a, b, dim)
        )
      )
    }
    out.push(
      mk(
        `repeat_${dt}_rows`,
        "repeat",
        [{ dtype: dt, ne: [7, 1, 2, 1] }, { dtype: dt, ne: [14, 5, 2, 2] }],
        ([a, s]) => Ops.repeat(a, s)
      )
    )
    out.push(
      mk(
        `repeat_${dt}_cols`,
        "repeat",
        [{ dtype: dt, ne: [1, 3] }, { dtype: dt, ne: [4, 6, 2] }],
        ([a, s]) => Ops.repeat(a, s)
      )
    )
    out.push(
      mk(
        `repeat_${dt}_batch`,
        "repeat",
        [{ dtype: dt, ne: [5, 2] }, { dtype: dt, ne: [5, 4, 3] }],
        ([a, s]) => Ops.repeat(a, s)
      )
    )
    for (const [n, ne, nPast] of [["a", [10, 7, 2], 3], ["b", [7, 7], 0], ["c", [20, 5, 3], 12]] as const) {
      out.push(
        mk(
          `diag_mask_inf_${dt}_${n}`,
          "diag_mask_inf",
          [{ dtype: dt, ne }],
          ([a]) => Ops.diagMaskInf(a, nPast),
          0,
          "exact"
        )
      )
    }
    for (const kind of ["swiglu", "geglu"] as const) {
      const g = `glu_${kind}_${dt}`
      out.push(mk(`${g}_halves`, "glu", [{ dtype: dt, ne: [28, 5, 2] }], ([a]) => Ops.glu(a, kind), THRESHOLD.f16))
      out.push(
        mk(
          `${g}_swapped`,
          "glu",
          [{ dtype: dt, ne: [6, 3] }],
          ([a]) => Ops.glu(a, kind, { swapped: true }),
          THRESHOLD.f16
        )
      )
      out.push(
        mk(
          `${g}_split`,
          "glu",
          [{ dtype: dt, ne: [13, 5, 2] }, { dtype: dt, ne: [13, 5, 2] }],
          ([a, b]) => Ops.glu(a, kind, { gate: b }),
          THRESHOLD.f16
        )
      )
    }
  }
  // f32-only ops, as in ggml
  const f32Shapes = [
    ["odd", [37, 5, 2], (t: Tensor) => Effect.succeed(t)],
    ["long", [1000, 3], (t: Tensor) => Effect.succeed(t)],
    ["permuted", [37, 2, 5], (t: Tensor) => Ops.permute(t, [0, 2, 1, 3])]
  ] as const
  for (const [tag, ne, view] of f32Shapes) {
    const inp = [{ dtype: "f32" as const, ne }]
    out.push(mk(`sum_rows_${tag}`, "sum_rows", inp, ([a]) => Ops.sumRows(view(a))))
    out.push(mk(`mean_${tag}`, "mean", inp, ([a]) => Ops.mean(view(a))))
    out.push(mk(`cumsum_${tag}`, "cumsum", inp, ([a]) => Ops.cumsum(view(a))))
    out.push(mk(`sum_${tag}`, "sum", inp, ([a]) => Ops.sum(view(a))))
    out.push(mk(`pad_${tag}`, "pad", inp, ([a]) => Ops.pad(view(a), [3, 1, 2, 0])))
  }
  for (const [tag, ne] of [["odd", [37, 5]], ["long", [1000, 3]], ["short", [3, 17]]] as const) {
    out.push(mk(`argmax_${tag}`, "argmax", [{ dtype: "f32", ne }], ([a]) => Ops.argmax(a), 0, "exact"))
  }
  for (const [tag, ne, k] of [["odd", [21, 5, 2], 4], ["long", [300, 2], 10], ["row", [7, 3], 7]] as const) {
    out.push(mk(`argsort_asc_${tag}`, "argsort", [{ dtype: "f32", ne }], ([a]) => Ops.argsort(a, "asc"), 0, "exact"))
    out.push(mk(`argsort_desc_${tag}`, "argsort", [{ dtype: "f32", ne }], ([a]) => Ops.argsort(a, "desc"), 0, "exact"))
    out.push(mk(`top_k_${tag}`, "top_k", [{ dtype: "f32", ne }], ([a]) => Ops.topK(a, k), 0, "set_per_row"))
  }
  return out
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Outcome {
  readonly name: string
  readonly passed: boolean
  readonly detail: string
}

/** the host data of an input, from the case's seed */
const inputData = (input: Input, seed: number): ArrayLike<number> => {
  const n = input.ne.reduce((a, b) => a * b, 1)
  if (input.values !== undefined) return input.values
  if (input.dtype === "i32") {
    if (input.distinct !== undefined) {
      const perm = Array.from({ length: input.distinct }, (_, i) => i)
      const next = Gen.prng(seed)
      for (let i = perm.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1))
        ;[perm[i], perm[j]] = [perm[j], perm[i]]
      }
      return Int32Array.from({ length: n }, (_, i) => perm[i % input.ne[0]])
    }
    return Gen.indices(seed, n, input.index ?? 1)
  }
  return Gen.values(seed, n, { positive: input.positive ?? false })
}

const GUARD = 64
const SENTINEL = 0xa5
const POISON = 0xff

/**
 * Runs a case on a backend with every tensor between sentinel guards and outputs poisoned; returns the
 * output and whether the guards survived.
 *
 * @since 0.1.0
 * @category running
 */
export const runGuarded = (
  c: Case,
  backend: Backend,
  seed: number
): Effect.Effect<
  { readonly output: ArrayLike<number>; readonly overwritten: ReadonlyArray<string> },
  ShapeError | AllocationError | UnsupportedOp | OutOfBounds | BackendError,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const g = Graph.make()
    const inputs: Array<Tensor> = []
    for (const [i, spec] of c.inputs.entries()) inputs.push(yield* g.input(`in${i}`, spec.dtype, spec.ne))
    const y = yield* g.output(c.build(inputs), "out")
    const graph = g.build()
    const owners = [...graph.leafs, ...graph.nodes.filter((n) => n.viewSrc === undefined)]
    const bufferType = backend.device.bufferType
    const align = (n: number) => Math.ceil(n / bufferType.alignment) * bufferType.alignment
    let offset = align(GUARD)
    const placed: Array<{ t: Tensor; offset: number; size: number }> = []
    for (const t of owners) {
      const size = Math.max(bufferType.allocSize(t), 1)
      placed.push({ t, offset, size })
      offset = align(offset + size + GUARD)
    }
    const buffer: Buffer = yield* bufferType.allocate(offset + GUARD)
    yield* buffer.memset(0, buffer.size, SENTINEL)
    for (const p of placed) yield* buffer.memset(p.offset, p.size, POISON)
    const bindings: Array<Binding> = placed.map((p) => ({ tensor: p.t, buffer, offset: p.offset }))
    const plan = yield* backend.allocate(graph, { bindings })
    for (const [i, spec] of c.inputs.entries()) yield* plan.set(inputs[i], inputData(spec, seed + 7919 * i))
    yield* backend.compute(plan)
    const output = yield* plan.get(y)
    const bytes = yield* buffer.get(0, buffer.size)
    const overwritten: Array<string> = []
    let start = 0
    for (const p of [...placed, { t: undefined, offset: buffer.size, size: 0 }]) {
      for (let k = start; k < p.offset; k++) {
        if (bytes[k] !== SENTINEL) {
          overwritten.push(`byte ${k} before ${p.t ? Op.name(p.t.op) : "the end"}`)
          break
        }
      }
      start = p.offset + p.size
    }
    return { output, overwritten }
  })

/**
 * Runs a case on the backend under test and on the CPU reference and compares them.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (
  c: Case,
  tested: Backend,
  reference: Backend,
  seed = 1
): Effect.Effect<Outcome, ShapeError | AllocationError | UnsupportedOp | OutOfBounds | BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const ours = yield* runGuarded(c, tested, seed)
    const ref = yield* runGuarded(c, reference, seed)
    if (ours.overwritten.length > 0) {
      return { name: c.name, passed: false, detail: `out-of-bounds write: ${ours.overwritten.join("; ")}` }
    }
    const result = Compare.compare(c.compare, ours.output, ref.output, {
      bound: c.nmse,
      rowLength: rowLength(c, ref.output.length)
    })
    return { name: c.name, passed: result.passed, detail: result.detail }
  }).pipe(Effect.withSpan("Conformance.run", { attributes: { case: c.name } }))

/** the length of the output's rows: the output's elements over the first input's rows (top_k's k) */
const rowLength = (c: Case, outputLength: number) => {
  const rows = c.inputs[0].ne.slice(1).reduce((a, b) => a * b, 1)
  return outputLength / rows
}

/**
 * A CPU backend to compare against, independent of any registry.
 *
 * @since 0.1.0
 * @category constructors
 */
export const referenceBackend: Effect.Effect<Backend, never, Scope.Scope> = Effect.suspend(() =>
  Cpu.make({ name: "CPU-reference" }).makeBackend()
)
