/**
 * Sorting kernels: argsort and top_k by rank, one thread per element counting the elements of its row
 * that sort before it (ties by index), then writing its index at its rank.
 *
 * @internal
 */
import type { Op } from "@effect-gpu/core/Op"
import type * as Tensor from "@effect-gpu/core/Tensor"
import { elementwise } from "./elementwise.js"
import type { Kernel, KernelTarget } from "./kernel.js"
import { u32 } from "./kernel.js"

/** @internal: argsort writes each index at its rank, top_k the first k ranks (largest first) */
export const rank = (
  node: Tensor.Tensor,
  op: Extract<Op, { _tag: "Argsort" | "TopK" }>,
  target: KernelTarget
): Kernel => {
  const desc = op._tag === "TopK" || op.order === "desc"
  const before = desc ? "(y > x || (y == x && j < i0))" : "(y < x || (y == x && j < i0))"
  const k = op._tag === "TopK" ? op.k : node.ne[0]
  return elementwise(
    { family: "ew", op: op._tag === "TopK" ? "top_k" : "argsort", desc },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    "a",
    `  let x = ld_a(ix_a(i0, i1, i2, i3));
  var rank = 0u;
  for (var j = 0u; j < P.a_ne0; j++) {
    let y = ld_a(ix_a(j, i1, i2, i3));
    if ${before} { rank++; }
  }
  if (rank < P.k) { st_d(ix_d(rank, i1, i2, i3), i32(i0)); }`,
    [u32("k", k)],
    target
  )
}
