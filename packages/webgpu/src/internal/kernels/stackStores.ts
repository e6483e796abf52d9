/**
 * A decoding step's keys and values stored by the product that computes them: where a layer's q/k/v stack
 * (mul_mat_stack: the int8 form, or f16 weights by subgroups) is followed by the rope_set_rows_kv that
 * rotates its key rows and stores
 * them and its value rows into the caches, the stack's kernel does both stores as it writes its rows, and
 * the store's own dispatch goes (a dispatch a layer fewer). Rope mode 0 only: it rotates adjacent pairs,
 * which a workgroup's rows hold side by side.
 *
 * @internal
 */
import * as Tensor from "@effect-gpu/core/Tensor"
import type { KernelTarget, Operand, Param } from "./kernel.js"
import { u32 } from "./kernel.js"
import { ropeAngle } from "./rope.js"

/**
 * @internal: stores a stack's kernel makes besides its result: operands and parameters it adds, module-scope
 * WGSL, and WGSL run for each row `row` (below M) with its value `v`, the workgroup's row values in `red`
 * (row `row` at `lid`)
 */
export interface RowStores {
  readonly operands: ReadonlyArray<Operand>
  readonly params: ReadonlyArray<Param>
  readonly decls: string
  readonly code: string
  readonly variant: { readonly [choice: string]: string | number | boolean }
}

/** @internal: where a tensor lies: its GPU buffer and byte offset */
export type Locate = (t: Tensor.Tensor) => { readonly buffer: unknown; readonly offset: number } | undefined

/** the row of `stack`'s result where contiguous f32 `t` starts, if t lies inside it at a whole row */
const rowWithin = (t: Tensor.Tensor, stack: Tensor.Tensor, locate: Locate): number | undefined => {
  const [at, home] = [locate(t), locate(stack)]
  if (at === undefined || home === undefined || at.buffer !== home.buffer) return undefined
  if (t.dtype !== "f32" || !Tensor.isContiguous(t)) return undefined
  const bytes = at.offset - home.offset
  if (bytes < 0 || bytes % 4 !== 0 || bytes + Tensor.nbytes(t) > Tensor.nbytes(stack)) return undefined
  return bytes / 4
}

/**
 * @internal: the stores of rope_set_rows_kv `store` as the epilogue of the stack `stack` computes, or
 * undefined where the stack cannot make them: one token; the store's keys and values the stack's last
 * two parts (keys then values, to the end of its rows) at an even row; rope mode 0 over heads of even size;
 * `bindings` storage bindings (the stack's own) leaving room for the store's under the adapter's limit
 */
export const keysAndValues = (
  stack: Tensor.Tensor,
  store: Tensor.Tensor,
  target: KernelTarget,
  locate: Locate,
  bindings: number,
  maxBindings: number
): RowStores | undefined => {
  if (stack.op._tag !== "MulMatStack" || store.op._tag !== "RopeSetRowsKv" || target.storesInProducts === false) {
    return undefined
  }
  const op = store.op
  const [, keys, positions] = store.src
  const at = op.hasFreqFactors ? 4 : 3
  const [indices, valueTable, values] = store.src.slice(at, at + 3)
  const M = stack.ne[0]
  const D = keys.ne[0]
  if (op.mode !== 0 || D % 2 !== 0 || op.nDims > D || stack.ne[1] !== 1 || Tensor.nrows(stack) !== 1) return undefined
  if (keys.ne[2] !== 1 || keys.ne[3] !== 1 || values.ne[1] !== 1 || indices.ne[0] !== 1) return undefined
  const keyRow = rowWithin(keys, stack, locate)
  const valueRow = rowWithin(values, stack, locate)
  if (keyRow === undefined || valueRow === undefined || keyRow % 2 !== 0) return undefined
  if (keyRow + Tensor.nelements(keys) !== valueRow || valueRow + Tensor.nelements(values) !== M) return undefined
  const operands: Array<Operand> = [
    { name: "p", tensor: positions },
    { name: "x", tensor: indices },
    { name: "dk", tensor: store, writes: true },
    { name: "dv", tensor: valueTable, writes: true },
    ...(op.hasFreqFactors ? [{ name: "f", tensor: store.src[3] }] : [])
  ]
  if (bindings + operands.length > maxBindings) return undefined
  const angle = ropeAngle(op)
  return {
    operands,
    params: [u32("kv_k", keyRow), u32("kv_v", valueRow), u32("kv_d", D), ...angle.params],
    decls: angle.code,
    // a key row rotated with its pair's other row (rows 2j and 2j + 1 of a head, side by side in red), then
    // stored at element (row - kv_k) of the key table's row idx[0]; a value row stored as it is
    code: `let slot = u32(ldi_x(ix_x(0u, 0u, 0u, 0u)));
    if (row >= P.kv_v) {
      if (slot < P.dv_ne1) { st_dv(ix_dv(row - P.kv_v, slot, 0u, 0u), v); }
    } else if (row >= P.kv_k) {
      let e = row - P.kv_k;
      let j = e % P.kv_d;
      var o = v;
      if (j < P.n_dims) {
        let other = red[lid ^ 1u];
        let cs = rope_cs(j / 2u, f32(ldi_p(ix_p(0u, 0u, 0u, 0u))));
        o = select(other * cs.y + v * cs.x, v * cs.x - other * cs.y, j % 2u == 0u);
      }
      if (slot < P.dk_ne1) { st_dk(ix_dk(e, slot, 0u, 0u), o); }
    }`,
    variant: { stores: "kv", freqFactors: op.hasFreqFactors, yarn: op.extFactor !== 0 }
  }
}
