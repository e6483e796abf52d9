/**
 * What a kernel is, for every family: a typed variant (the family and its compiled-in choices, from
 * which the pipeline key is derived), the operands it binds, the parameters it reads, its grid, and the
 * body of `main`. Also the target it is generated for: what the device offers (f16, subgroups, subgroup
 * matrices, workgroup limits).
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import type { Tensor } from "@effect-gpu/core/Tensor"
import type { Field } from "../wgsl.js"

/**
 * @internal: a kernel's family and the choices compiled into its WGSL; two kernels with equal variants
 * (and equal operand types and access, which the program adds) have the same source
 */
export interface Variant {
  readonly family: string
  readonly [choice: string]: string | number | boolean
}

/** @internal: the pipeline key of a variant: its family, then its choices sorted by name */
export const keyOf = (variant: Variant): string =>
  [
    variant.family,
    ...Object.keys(variant).filter((k) => k !== "family").sort().map((k) => `${k}=${String(variant[k])}`)
  ].join(":")

/** @internal */
export interface Operand {
  readonly name: string
  readonly tensor: Tensor
  /**
   * bytes the binding covers from the tensor's start, past its own (default): scratch a kernel keeps after
   * its result, which the device's buffer type counts in the result's allocSize
   */
  readonly extent?: number
  /**
   * bound inside another tensor's memory, `at` bytes past its start, instead of at `tensor`'s own (which
   * then gives only its type and shape): a copy a kernel keeps in the scratch after its result
   */
  readonly within?: { readonly tensor: Tensor; readonly at: number }
  /** written by the kernel besides its result "d" (a table it also stores rows in): bound read-write */
  readonly writes?: boolean
}

/** @internal */
export interface Param {
  readonly field: Field
  readonly value: number
}

/** @internal */
export interface Kernel {
  readonly variant: Variant
  /** derived from the variant (`keyOf`) */
  readonly key: string
  /** bind every operand as vec4 arrays; needs element offsets that are multiples of 4, else `fallback` runs */
  readonly vec4?: boolean
  /**
   * with `vec4`: f16 operands bound as 16-byte vec4<u32> arrays of 8 elements (one load moves 8 f16);
   * needs their element offsets to be multiples of 8, else `fallback` (the vec4 form) runs
   */
  readonly wide?: boolean
  /**
   * with `vec4`: operands bound as plain arrays all the same (offsets still aligned as vec4 ones): a kernel
   * that reads their words one at a time (a word picked out of a vec4 binding can load all 16 bytes)
   */
  readonly scalar?: ReadonlyArray<string>
  /**
   * the kernel to run where the operands' offsets turn out not to allow vec4 (or wide) bindings, or an
   * operand's extent does not fit its buffer
   */
  readonly fallback?: Kernel
  /** a kernel dispatched right after this one for the same node (which reads what this one wrote) */
  readonly next?: Kernel
  /**
   * a split-K merge that only adds its node's partial sums (no bias, epilogue or stores): `splits` sets of
   * `count` values after the result, which a reader may add itself in its place (splitsIn.ts)
   */
  readonly sums?: { readonly splits: number; readonly count: number }
  /** WGSL extensions the kernel needs besides f16 (which the header enables for f16 operands) */
  readonly enables?: ReadonlyArray<string>
  /** WGSL diagnostics the kernel turns off (with the reason in the kernel) */
  readonly diagnosticsOff?: ReadonlyArray<string>
  readonly operands: ReadonlyArray<Operand>
  readonly params: ReadonlyArray<Param>
  readonly workgroups: readonly [number, number, number]
  /** the entry point and what it needs, given the names above */
  readonly main: string
}

/** @internal: a kernel record, its key derived from its variant */
export const make = (spec: Omit<Kernel, "key">): Kernel => ({ ...spec, key: keyOf(spec.variant) })

/** @internal: a subgroup-matrix tiling of mul_mat, in 16x16 fragments */
export interface MatrixTile {
  /** subgroups along the result's rows (b's rows) and columns (a's rows) */
  readonly sgRows: number
  readonly sgCols: number
  /** 16x16 fragments per subgroup along each */
  readonly fragRows: number
  readonly fragCols: number
  /** K per shared-memory step, a multiple of 16 */
  readonly depth: number
  /**
   * workgroups sharing each block's K range (split-K), their partial sums added by a second dispatch;
   * default: by how many workgroups the grid has (SPLIT_FILL)
   */
  readonly splits?: number
  /**
   * q4_0 and q8_0 blocks loaded a word a lane, 8 lanes a row (shared by subgroup shuffles), where a
   * lane loading its row's words alone ran slower; default: on
   */
  readonly laneLoads?: boolean
  /**
   * which of the result's tiles neighbouring workgroups take: "columns" (b's column blocks of one row
   * block of a, so that a's rows are read from memory once while they are in L2), or "rows" (a's row
   * blocks of one column block); default: columns
   */
  readonly order?: "rows" | "columns"
}

/** @internal: the register tiling of the vec4 mul_mat kernel: results per thread along m and n, and K step */
export interface RegisterTile {
  readonly m: number
  readonly n: number
  readonly depth: number
  /** the K loop written out step by step */
  readonly unroll?: boolean
  /** which of the result's blocks neighbouring workgroups take, as MatrixTile.order; default: rows */
  readonly order?: "rows" | "columns"
}

/** @internal: the shape of the quantized matrix-vector kernel: rows per group of 32 lanes, most columns */
export interface QuantizedDecode {
  readonly rows: number
  readonly columns: number
  /** chunks of 1024 of b staged in workgroup memory at once; default: as many as fit, up to 8 */
  readonly stage?: number
  /** a's rows staged in workgroup memory by 16-byte loads too, where strides allow; default: off */
  readonly staged?: boolean
  /**
   * the int8 form (b quantized to q8_0 blocks, q8_K for q4_K and q6_K, by each workgroup; int8 dot
   * products) for q4_0, q4_1, q5_0, q8_0, q4_K and q6_K where it applies; default: on
   */
  readonly int8?: boolean
  /** rows a subgroup of the int8 form owns; default: 2 (1 ran an 8B q8_0 decode 13% slower) */
  readonly int8Rows?: number
  /**
   * the int8 form splits K over workgroups of at most this many values each (split-K, a second dispatch
   * adding their sums) where its grid has fewer than `int8SplitBelow` workgroups; default: no split (slower:
   * benchmarks/RESULTS.md)
   */
  readonly int8Split?: number
  /** the grids the int8 form splits where int8Split is set: fewer workgroups than this; default 1024 */
  readonly int8SplitBelow?: number
  /**
   * the int8 form's workgroups at most this many, each taking row groups in turn over one rounding of b
   * (where K is not split and there is one batch); 0: a workgroup a row group; default: 396 on GPUs, none
   * on software adapters
   */
  readonly int8Groups?: number
  /**
   * a norm the int8 form makes (normIn.ts) read once as b is rounded, the row's scale applied to each block's
   * after (not read once for the scale and again for the values); 32-value types, K not split; default: on
   * (faster: benchmarks/RESULTS.md; false reads it twice)
   */
  readonly normOnce?: boolean
}

/** @internal: flash attention's decode form, each field overriding the default */
export interface AttentionDecode {
  readonly splits?: number
  readonly block?: number
  readonly subgroups?: number
  /** lanes across the keys for the scores (a key a lane), or across the head dimension (a sum a score) */
  readonly across?: "keys" | "dims"
  /** query heads a workgroup takes (a divisor of the heads per KV head) */
  readonly heads?: number
  /** lanes that share a key's score in the keys form (1, or 4 where the head size allows) */
  readonly keyLanes?: number
  /** the keys form's V rows of a block loaded with its K rows, before the scores (default: where they fit) */
  readonly valuesAhead?: boolean
}

/** @internal: flash attention's matrix form for prompts, each field overriding the default */
export interface AttentionPrefill {
  /** one pass over the keys with O rescaled where a row's max grows, or two passes that never rescale */
  readonly form?: "one-pass" | "two-pass"
  /** subgroups (16 query rows each) a workgroup of the one-pass form takes */
  readonly subgroups?: number
  /**
   * K, V and the mask's words of the next block loaded into registers under the current block's work
   * (default: on)
   */
  readonly prefetch?: boolean
  /**
   * K's, V's, S's and P's staged rows padded (a lane's keys every other one), so that lanes and matrix loads
   * fall in distinct banks (default: on where the padding fits the workgroup memory)
   */
  readonly spread?: boolean
  /**
   * the one-pass form's keys split over this many workgroups a query block, their partial results merged
   * by a second dispatch (default: as many as bring a short prompt's workgroups to one an SM: FILL in
   * attentionTiles.ts)
   */
  readonly splits?: number
}

/** @internal: what the device offers the kernels, which they are chosen and generated for */
export interface KernelTarget {
  readonly f16: boolean
  readonly maxWorkgroups: number
  /** subgroup operations (WGSL subgroups): row reductions use them */
  readonly subgroups?: boolean
  /** WGSL's packed_4x8_integer_dot_product (dot4I8Packed, pack4xI8): the int8 matrix-vector form uses it */
  readonly dot4?: boolean
  /** the subgroup size where the adapter has one size only (subgroupMinSize = subgroupMaxSize) */
  readonly subgroupSize?: number
  /**
   * shaders run on the CPU (a fallback adapter, e.g. lavapipe): every invocation costs and a few cores
   * need few workgroups, so kernels give each invocation more work
   */
  readonly software?: boolean
  /** bytes of workgroup memory a kernel may use */
  readonly workgroupStorage?: number
  /** invocations a workgroup may have */
  readonly workgroupInvocations?: number
  /**
   * f16 x f16 -> f32 subgroup matrices of 16x16x16 on subgroups of exactly 32 invocations: the
   * tensor-core path for f16 mul_mat (Dawn's chromium_experimental_subgroup_matrix)
   */
  readonly subgroupMatrix?: boolean
  /** overrides the subgroup-matrix tiling (benchmarks try several) */
  readonly matrixTile?: MatrixTile
  /** overrides which of a subgroup-matrix product's tiles neighbouring workgroups take (MatrixTile.order) */
  readonly matrixOrder?: "rows" | "columns"
  /**
   * f16 products whose 128 x 128 grid leaves the last wave of workgroups part empty take 96 x 128 tiles
   * where those fill fewer waves (FILL_TILE); default: on
   */
  readonly fillTiles?: boolean
  /** overrides the register tiling of the vec4 mul_mat kernel (benchmarks try several) */
  readonly registerTile?: RegisterTile
  /** overrides which of a register-tiled product's blocks neighbouring workgroups take (RegisterTile.order) */
  readonly registerOrder?: "rows" | "columns"
  /**
   * a decoding step's keys and values stored into their caches by the q/k/v stack that computes them (the
   * int8 form, f16 weights by subgroups), not by a dispatch of their own; default: on
   */
  readonly storesInProducts?: boolean
  /**
   * a decoding step's residual sum and its norm made by the product that reads the norm (normIn.ts);
   * default: for rows of up to 4096 values; true for any, false for none
   */
  readonly normsInProducts?: boolean
  /**
   * a decoding step's attention merged by the product that reads it (mergeIn.ts), not by a dispatch of its
   * own; default: for outputs of up to 2048 values; true for any, false for none
   */
  readonly mergesInProducts?: boolean
  /**
   * a split-K product's partial sums added by the add_rms_norm that reads it next (splitsIn.ts), not by the
   * product's merge dispatch; default: on
   */
  readonly splitsInNorms?: boolean
  /**
   * a query's rope made by the keys' and values' store (rope_set_rows_kv) dispatched right after it, on
   * threads of its own, not by a dispatch of its own; default: on
   */
  readonly queryRopesInStores?: boolean
  /** overrides the quantized matrix-vector kernel's shape (tests and benchmarks) */
  readonly quantizedDecode?: QuantizedDecode
  /** overrides flash attention's decode form (tests and benchmarks) */
  readonly attentionDecode?: AttentionDecode
  /** overrides flash attention's matrix form for prompts (tests and benchmarks) */
  readonly attentionPrefill?: AttentionPrefill
  /**
   * overrides how a quantized product past the matrix-vector kernel's columns reads its weights: blocks
   * dequantized into its tiles as they are staged, or an f16 copy of them made first (tests and benchmarks)
   */
  readonly quantizedPrefill?: "tiles" | "copy"
  /**
   * overrides how the f16 copy of q4_0 / q8_0 weights stages its runs: a word a load, a thread's loads all
   * issued before its stores (the default), or awaited one by one, or 16 bytes a load (tests and benchmarks)
   */
  readonly copyLoads?: "words" | "vec4" | "ahead"
  /** overrides the f16 copy's vec4s a thread (its run of q4_0 / q8_0 blocks) and its stores' width */
  readonly copyShape?: { readonly vecs?: 4 | 8 | 16; readonly stores?: "half4" | "wide" }
  /**
   * a prompt's gated FFN (gate and up products over a layer's stacked weights, and their swiglu) as one
   * product storing silu(gate) * up, with the register-tiled and scalar tiles; `false`: nowhere
   */
  readonly gatedPrompts?: false
  /** overrides the invocations of a row kernel's workgroup (tests and benchmarks) */
  readonly rowThreads?: number
  /**
   * how a product that makes its own norm (normIn.ts) reduces the row's squares: by subgroup sums where the
   * kernel has subgroups (the default), or by a tree over workgroup memory (tests and benchmarks)
   */
  readonly normReduce?: "tree" | "subgroups"
  /**
   * overrides whether short fixed loops are written out (the GPU form) or kept as loops (the software
   * form); tests force the GPU form on a software adapter
   */
  readonly writeOut?: boolean
}

/**
 * @internal: short fixed loops written out: GPU compilers then keep their arrays in registers and issue
 * their loads together
 */
export const writesOut = (target: KernelTarget): boolean => target.writeOut ?? target.software !== true

/** @internal: invocations of the 1-D workgroup most kernels use */
export const WG = 256

/**
 * @internal: the entry point most kernels share: a 1-D workgroup of `size` invocations over a folded
 * grid. With `subgroups`, it also keeps the subgroup size and this invocation's lane in the private
 * variables `sgs` and `sgl` (declared by SUBGROUP_LANES), so helper functions can use them.
 */
export const entry = (size: number = WG, subgroups = false): string => {
  const builtins = [
    "@builtin(workgroup_id) wid: vec3<u32>",
    "@builtin(num_workgroups) nwg: vec3<u32>",
    "@builtin(local_invocation_index) lid: u32",
    ...(subgroups ? ["@builtin(subgroup_size) sg_size: u32", "@builtin(subgroup_invocation_id) sg_lane: u32"] : [])
  ]
  const lanes = subgroups ? "\n  sgs = sg_size;\n  sgl = sg_lane;" : ""
  return `@compute @workgroup_size(${size})\nfn main(${builtins.join(", ")}) {${lanes}`
}

/** @internal: the private variables `entry(size, true)` fills */
export const SUBGROUP_LANES = "var<private> sgs: u32;\nvar<private> sgl: u32;"

/** @internal */
export const u32 = (name: string, value: number): Param => ({ field: { name, type: "u32" }, value })
/** @internal */
export const f32 = (name: string, value: number): Param => ({ field: { name, type: "f32" }, value })

/**
 * @internal: how an operand of shape `b` is indexed where it is broadcast over `over`, a letter per
 * dimension: "=" the same extent (the coordinate as is), "1" one element (0), "%" the coordinate modulo the
 * extent. Kernels name it in their variant: the WGSL differs
 */
export const bcastForm = (b: Tensor, over: Tensor): string =>
  range(4).map((k) => b.ne[k] === over.ne[k] ? "=" : b.ne[k] === 1 ? "1" : "%").join("")

/**
 * @internal: the index of a broadcast operand at (i0, i1, i2, i3): each coordinate modulo its extent, or as
 * `form` (`bcastForm`) says; a single-workgroup row kernel spent most of its time on the four integer
 * divisions an element of the modulo form costs (benchmarks/RESULTS.md, "where a decoding step goes")
 */
export const bcast = (b: string, i0 = "i0", i1 = "i1", i2 = "i2", i3 = "i3", form = "%%%%"): string =>
  `ix_${b}(${
    [i0, i1, i2, i3].map((i, k) => form[k] === "=" ? i : form[k] === "1" ? "0u" : `${i} % P.${b}_ne${k}`).join(", ")
  })`

/**
 * @internal: `t` contiguous along its rows, every row and batch stride a multiple of `by` elements (the
 * stride of a dimension of extent 1 is never used, so it may be anything): what loads of `by` at a time need
 */
export const stridesAligned = (t: Tensor, by: number): boolean => {
  const ts = DType.typeSize(t.dtype)
  return t.nb[0] === ts && t.nb.slice(1).every((nb, i) => t.ne[i + 1] === 1 || (nb / ts) % by === 0)
}

/** @internal: [0, n) */
export const range = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

/**
 * @internal: WGSL repeating `body(i)` for i in 0..count-1: written out where `writeOut` (GPU compilers
 * then keep private arrays indexed by it in registers), else a loop over `name` (software adapters'
 * compilers take tens of seconds over written-out forms)
 */
export const repeat = (count: number, name: string, writeOut: boolean, body: (i: string) => string): string =>
  writeOut
    ? range(count).map((i) => `{\n${body(`${i}u`)}\n}`).join("\n")
    : `for (var ${name} = 0u; ${name} < ${count}u; ${name}++) {\n${body(name)}\n}`
