/**
 * Indexing kernels: get_rows gathers rows of a table by i32 indices, set_rows scatters rows into a
 * destination (a view of it is the result), converting to its type.
 *
 * @internal
 */
import type * as Tensor from "@effect-gpu/core/Tensor"
import { elementwise } from "./elementwise.js"
import type { Kernel, KernelTarget } from "./kernel.js"

/** @internal */
export const getRows = (node: Tensor.Tensor, target: KernelTarget): Kernel => {
  const [load, zero] = node.dtype === "i32" ? ["ldi_a", "0"] : ["ld_a", "0.0"]
  return elementwise(
    { family: "ew", op: "get_rows" },
    [{ name: "a", tensor: node.src[0] }, { name: "x", tensor: node.src[1] }, { name: "d", tensor: node }],
    "d",
    // an index outside the table reads zeros (a negative one wraps past a_ne1 as u32)
    `  let r = u32(ldi_x(ix_x(i1, i2, i3, 0u)));
  if (r >= P.a_ne1) { st_d(ix_d(i0, i1, i2, i3), ${zero}); return; }
  st_d(ix_d(i0, i1, i2, i3), ${load}(ix_a(i0, r, i2, i3)));`,
    [],
    target
  )
}

/** @internal: iterates over the source rows; the result `d` is a view of the destination */
export const setRows = (node: Tensor.Tensor, target: KernelTarget): Kernel =>
  elementwise(
    { family: "ew", op: "set_rows" },
    [{ name: "s", tensor: node.src[1] }, { name: "x", tensor: node.src[2] }, { name: "d", tensor: node }],
    "s",
    // a row outside the destination is dropped
    `  let r = u32(ldi_x(ix_x(i1, i2 % P.x_ne1, i3 % P.x_ne2, 0u)));
  if (r >= P.d_ne1) { return; }
  st_d(ix_d(i0, r, i2, i3), ld_s(ix_s(i0, i1, i2, i3)));`,
    [],
    target
  )
