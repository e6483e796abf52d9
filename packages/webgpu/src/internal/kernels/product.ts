/**
 * What every matrix-product kernel shares: ggml's layout (a is [K, M], b is [K, N], the result [M, N];
 * result row n is a's rows dotted with b's row n), the operands, the bias epilogue, the sizes, the
 * batch broadcast, and the WGSL that places a workgroup's block.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import * as Tensor from "@effect-gpu/core/Tensor"
import type { Operand, Param } from "./kernel.js"
import { bcast, range, stridesAligned, u32 } from "./kernel.js"
import type { RowStores } from "./stackStores.js"

/** @internal */
export interface Product {
  readonly operands: ReadonlyArray<Operand>
  /** a (the weights) is quantized: its rows are read through ldq_a(row byte offset, k) */
  readonly quantized: boolean
  readonly bias: boolean
  /** adds the bias at (m, nn, b2, b3) to `v` */
  readonly epilogue: string
  readonly M: number
  readonly N: number
  readonly K: number
  readonly batches: number
  readonly params: ReadonlyArray<Param>
}

/**
 * @internal: a product's b made by its own kernel from other operands, where a dispatch before made it (a
 * norm, normIn.ts; attention's split partials merged, mergeIn.ts): the operands and parameters it adds (b's
 * binding goes), its workgroup memory (and its bytes) and the WGSL each of the `n` invocations runs first, b's four values
 * from element k, and what it adds to the kernel's variant
 */
export interface MadeB {
  readonly operands: ReadonlyArray<Operand>
  readonly params: ReadonlyArray<Param>
  readonly decls: (n: number) => string
  /** the bytes of workgroup memory `decls` takes */
  readonly workgroupBytes: (n: number) => number
  /** WGSL before b's first read, over `n` invocations; `lanes`: the kernel's subgroups, where it has them */
  readonly prologue: (n: number, lanes?: number) => string
  readonly fourAt: (k: string) => string
  readonly variant: { readonly [choice: string]: string | number | boolean }
  /**
   * b as one scale of the whole row (`nscale`) times values known element by element (a norm's x * w): WGSL
   * `begin`, then `load(k, into)` setting vec4 `into` to the unscaled four values from k and adding what the
   * scale needs, then `scale(n, lanes)` over `n` invocations once every value was loaded, setting `nscale`.
   * A kernel rounding b in blocks so reads b once, not once for the scale and again for the values (each
   * block's scale times nscale after, as the rounding of a block is the same for any scale of it)
   */
  readonly scaled?: {
    readonly begin: string
    readonly load: (k: string, into: string) => string
    readonly scale: (n: number, lanes?: number) => string
  }
}

/** @internal: a kernel form's b made by its own kernel, where it is (MadeB) */
export interface MakesB {
  readonly made?: MadeB
}

/**
 * @internal: what a matrix-vector form computes: one product; a gated FFN's two (silu(a b) * (u b), the up
 * weights operand u); or a stack of `parts` products over the same b, their rows one after another (the
 * parts' first rows in params s1..; weights a, a1, ...), with `Stack`'s own fields and any stores made of
 * the rows besides the result (a layer's keys and values into their caches)
 */
export type Form<Stack = object> =
  & (
    | { readonly kind: "plain" }
    | { readonly kind: "gated" }
    | ({ readonly kind: "stack"; readonly parts: number; readonly stores?: RowStores } & Stack)
  )
  & MakesB

/** @internal: the product computed by `node` (mul_mat, or mul_mat_add with its bias) */
export const of = (node: Tensor.Tensor, bias: Tensor.Tensor | undefined): Product => {
  const [a, b] = node.src
  const operands: Array<Operand> = [{ name: "a", tensor: a }, { name: "b", tensor: b }, { name: "d", tensor: node }]
  if (bias) operands.push({ name: "c", tensor: bias })
  return {
    operands,
    quantized: DType.isQuantized(a.dtype),
    bias: bias !== undefined,
    epilogue: bias ? `v += ld_c(${bcast("c", "m", "nn", "b2", "b3")});` : "",
    M: node.ne[0],
    N: node.ne[1],
    K: a.ne[0],
    batches: node.ne[2] * node.ne[3],
    // b's batches broadcast over a's (ggml: b.ne[2] is a multiple of a.ne[2])
    params: [u32("r2", b.ne[2] / a.ne[2]), u32("r3", b.ne[3] / a.ne[3])]
  }
}

/**
 * @internal: whether M, N and K are multiples of a workgroup's block (bm x bn, K steps of bk): then every
 * load is in range and the tiled kernels load without bounds checks
 */
export const wholeBlocks = ({ K, M, N }: Product, bm: number, bn: number, bk: number): boolean =>
  M % bm === 0 && N % bn === 0 && K % bk === 0

/** @internal: `by` K at a time: K contiguous in both operands, K and every row and batch stride a multiple of `by` */
export const aligned = (by: number) => (product: Product, a: Tensor.Tensor, b: Tensor.Tensor): boolean =>
  product.K % by === 0 && stridesAligned(a, by) && stridesAligned(b, by)

/** @internal: four K at a time (vec4 loads) */
export const fourAligned = aligned(4)

/** @internal: eight K at a time (16-byte loads of f16) */
export const eightAligned = aligned(8)

/**
 * @internal: WGSL: the batch (b2, b3) from `batch` (the batch's index), the first result row and column
 * (m0, n0) of a block, and M, N, K; `columnsFirst`: workgroup x counts column blocks (b's), y row blocks
 */
export const origin = (rows: number, cols: number, batch = "wid.z", columnsFirst = false): string =>
  `  let b2 = ${batch} % P.d_ne2;
  let b3 = ${batch} / P.d_ne2;
  let m0 = ${columnsFirst ? "wid.y" : "wid.x"} * ${rows}u;
  let n0 = ${columnsFirst ? "wid.x" : "wid.y"} * ${cols}u;
  let M = P.d_ne0;
  let N = P.d_ne1;
  let K = P.a_ne0;`

/**
 * @internal: WGSL placing logical row `x` of a gated product (mul_mat_swiglu past the matrix-vector
 * columns: a prompt's gate and up products with their swiglu). Its tiles take a's rows in runs of `run`, a
 * run of gate rows then the same rows of up, which follow gate's in a's binding `m` rows on (`m` the
 * result's rows), so that each gate sum meets its up sum in one invocation or workgroup: `o` the result
 * row, `r` the weight row
 */
export const gatedRow = (x: string, run: number, m: string, o: string, r: string): string =>
  `let ${o} = ((${x}) / ${2 * run}u) * ${run}u + (${x}) % ${run}u; let ${r} = ${o} + (((${x}) / ${run}u) % 2u) * ${m};`

/**
 * @internal: a gated FFN's products past the matrix-vector columns (a prompt's mul_mat_swiglu) as one
 * product whose logical rows are gate's and up's (2 M): gate and up views of one tensor's two halves (a
 * layer's stacked weights, Fusion's rewrite of its product and swiglu), up's rows right after gate's, so
 * that one binding holds both and the tiles pair their rows (gatedRow); undefined where they are not so
 */
export const gated = (node: Tensor.Tensor): Product | undefined => {
  const [gate, up, b] = node.src
  const halves = node.ne[1] > 8 && gate.viewSrc !== undefined && up.viewSrc === gate.viewSrc &&
    gate.dtype === up.dtype && Tensor.sameShape(gate, up) && Tensor.isContiguous(gate) && Tensor.isContiguous(up) &&
    up.viewOffset === gate.viewOffset + Tensor.nbytes(gate) && gate.ne[2] === 1 && gate.ne[3] === 1
  if (!halves) return undefined
  return {
    operands: [{ name: "a", tensor: gate, extent: 2 * Tensor.nbytes(gate) }, { name: "b", tensor: b }, {
      name: "d",
      tensor: node
    }],
    quantized: DType.isQuantized(gate.dtype),
    bias: false,
    epilogue: "",
    M: 2 * node.ne[0],
    N: node.ne[1],
    K: gate.ne[0],
    batches: node.ne[2] * node.ne[3],
    params: [u32("r2", b.ne[2]), u32("r3", b.ne[3])]
  }
}

/** @internal: the weight operands of a stack of `parts` products (mul_mat_stack): a, a1, a2, ... */
export const stackWeights = (parts: number): Array<string> =>
  Array.from({ length: parts }, (_, i) => (i === 0 ? "a" : `a${i}`))

/**
 * @internal: WGSL that finds stack row `row`'s part (into `pt`, declared by the caller) and the index of its
 * first weight, shifted right by `shift` bits (the binding's unit), into `start`: the parts' rows follow
 * one another, each part's first row in params s1..
 */
export const stackRow = (parts: number, row: string, pt: string, start: string, shift: number): string =>
  `{
  var lr = ${row};
  ${pt} = 0u;
${
    range(parts - 1).map((i) => `  if (${row} >= P.s${i + 1}) { ${pt} = ${i + 1}u; lr = ${row} - P.s${i + 1}; }`).join(
      "\n"
    )
  }
${
    stackWeights(parts).map((n, i) =>
      `  if (${pt} == ${i}u) { ${start} = ix_${n}(0u, lr, b2 / P.r2, b3 / P.r3) >> ${shift}u; }`
    )
      .join("\n")
  }
}`

/**
 * @internal: WGSL that fills `starts` and `parts` (arrays of `rows`, declared here) for the stack rows
 * row0 .. row0 + rows - 1 of a subgroup (rows past the end take the last): each row's first weight,
 * shifted right by `shift` bits, and its part
 */
export const stackRows = (parts: number, rows: number, shift: number, starts: string, partOf: string): string =>
  `  var ${starts}: array<u32, ${rows}>;
  var ${partOf}: array<u32, ${rows}>;
  for (var r = 0u; r < ${rows}u; r++) {
    let sr = min(row0 + r, P.d_ne0 - 1u);
    var pt = 0u;
    var first = 0u;
${stackRow(parts, "sr", "pt", "first", shift)}
    ${partOf}[r] = pt;
    ${starts}[r] = first;
  }`
