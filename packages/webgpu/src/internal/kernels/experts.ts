/**
 * Mixture-of-experts kernels: mul_mat_id (each token's chosen experts' weights times its activations)
 * and add_id (each chosen expert's bias added). The expert ids are read on the device, so routing never
 * waits on the host; an id outside the table gives zeros, as get_rows does.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import type * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import { elementwise } from "./elementwise.js"
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, u32, WG } from "./kernel.js"

/** elements of K per thread at least (as the matrix-vector kernels) */
const PER_THREAD = 16

/**
 * @internal: mul_mat_id: as [K, M, n_expert], b [K, b1, n_tokens], ids [n_used, n_tokens]; result
 * [M, n_used, n_tokens], column (e, t) = as[ids[e, t]] times b[:, e % b1, t]. A workgroup computes
 * rows of one column, `tpr` threads per row splitting K (weights read in place, quantized blocks too)
 */
export const mulMatId = (node: Tensor.Tensor, target: KernelTarget): Kernel => {
  const [as, b, ids] = node.src
  const K = as.ne[0]
  const M = node.ne[0]
  const tpr = Math.min(WG, 2 ** Math.floor(Math.log2(Math.max(1, K / PER_THREAD))))
  const rows = WG / tpr
  const rowGroups = Math.ceil(M / rows)
  const quantized = DType.isQuantized(as.dtype)
  const weight = quantized ? "ldq_a(ix_a(0u, m, ex, 0u), k)" : "ld_a(ix_a(k, m, ex, 0u))"
  return KernelSpec.make({
    variant: { family: "mul_mat_id", threadsPerRow: tpr },
    operands: [{ name: "a", tensor: as }, { name: "b", tensor: b }, { name: "x", tensor: ids }, {
      name: "d",
      tensor: node
    }],
    params: [u32("row_groups", rowGroups)],
    workgroups: fold(rowGroups * ids.ne[0] * ids.ne[1], target.maxWorkgroups),
    main: `
var<workgroup> red: array<f32, ${WG}>;
${entry()}
  let g = wg_linear(wid, nwg);
  let column = g / P.row_groups;
  if (column >= P.x_ne0 * P.x_ne1) { return; }
  let e = column % P.x_ne0;
  let t = column / P.x_ne0;
  // rows past the end compute row M - 1 again: every thread must reach the barriers
  let row = (g % P.row_groups) * ${rows}u + lid / ${tpr}u;
  let m = min(row, P.d_ne0 - 1u);
  let tt = lid % ${tpr}u;
  let id = ldi_x(ix_x(e, t, 0u, 0u));
  var acc = 0.0;
  if (id >= 0 && u32(id) < P.a_ne2) {
    let ex = u32(id);
    let bcol = e % P.b_ne1;
    for (var k = tt; k < P.a_ne0; k += ${tpr}u) { acc += ${weight} * ld_b(ix_b(k, bcol, t, 0u)); }
  }
  red[lid] = acc;
  workgroupBarrier();
  for (var s = ${Math.floor(tpr / 2)}u; s > 0u; s >>= 1u) {
    if (tt < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  if (tt == 0u && row < P.d_ne0) { st_d(ix_d(m, e, t, 0u), red[lid]); }
}`
  })
}

/** @internal: add_id: a [n, n_used, n_tokens] plus b's row ids[e, t] (zeros for an id outside b) */
export const addId = (node: Tensor.Tensor, target: KernelTarget): Kernel =>
  elementwise(
    { family: "ew", op: "add_id" },
    [
      { name: "a", tensor: node.src[0] },
      { name: "b", tensor: node.src[1] },
      { name: "x", tensor: node.src[2] },
      { name: "d", tensor: node }
    ],
    "d",
    `  let r = ldi_x(ix_x(i1, i2, 0u, 0u));
  var bv = 0.0;
  if (r >= 0 && u32(r) < P.b_ne1) { bv = ld_b(ix_b(i0, u32(r), 0u, 0u)); }
  st_d(ix_d(i0, i1, i2, i3), ld_a(ix_a(i0, i1, i2, i3)) + bv);`,
    [],
    target
  )
