/**
 * Rotary position embedding: one thread per pair of a row, so an in-place rope reads both elements
 * before it writes either. Mode 0 rotates adjacent pairs, mode 2 (neox) the two halves of the first
 * n_dims; the rest of each row is copied.
 *
 * @internal
 */
import type { Op } from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, f32, u32, WG } from "./kernel.js"

/** @internal */
export const rope = (node: Tensor.Tensor, op: Extract<Op, { _tag: "Rope" }>, target: KernelTarget): Kernel => {
  const pairs = Math.ceil(node.ne[0] / 2)
  const [j0, j1] = op.mode === 0 ? ["2u * j", "2u * j + 1u"] : ["j", "j + half"]
  return KernelSpec.make({
    variant: { family: "rope", mode: op.mode },
    operands: [{ name: "a", tensor: node.src[0] }, { name: "p", tensor: node.src[1] }, { name: "d", tensor: node }],
    workgroups: fold(Math.ceil((pairs * Tensor.nrows(node)) / WG), target.maxWorkgroups),
    params: [f32("freq_base", op.freqBase), f32("freq_scale", op.freqScale), u32("n_dims", op.nDims)],
    main: `
${entry()}
  let idx = wg_linear(wid, nwg) * ${WG}u + lid;
  let pairs = (P.d_ne0 + 1u) / 2u;
  if (idx >= pairs * P.d_ne1 * P.d_ne2 * P.d_ne3) { return; }
  let j = idx % pairs;
  let r1 = idx / pairs;
  let i1 = r1 % P.d_ne1;
  let i2 = (r1 / P.d_ne1) % P.d_ne2;
  let i3 = r1 / (P.d_ne1 * P.d_ne2);
  let half = P.n_dims / 2u;
  if (j < half) {
    let j0 = ${j0};
    let j1 = ${j1};
    let pos = f32(ldi_p(ix_p(i2, 0u, 0u, 0u)));
    let theta = pos * P.freq_scale * pow(P.freq_base, -2.0 * f32(j) / f32(P.n_dims));
    let c = cos(theta);
    let s = sin(theta);
    let x0 = ld_a(ix_a(j0, i1, i2, i3));
    let x1 = ld_a(ix_a(j1, i1, i2, i3));
    st_d(ix_d(j0, i1, i2, i3), x0 * c - x1 * s);
    st_d(ix_d(j1, i1, i2, i3), x0 * s + x1 * c);
  } else {
    for (var e = 2u * j; e < min(2u * j + 2u, P.d_ne0); e++) {
      if (e >= P.n_dims) { st_d(ix_d(e, i1, i2, i3), ld_a(ix_a(e, i1, i2, i3))); }
    }
  }
}`
  })
}
