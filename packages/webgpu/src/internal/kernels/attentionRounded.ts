/**
 * A decoding step's split attention with each split's output row rounded to int8 blocks, where the int8
 * product reading it weighs the splits itself (QuantizedDecode.roundedMerges; mergeIn.ts): where the
 * attention's kernel keeps the blocks and how it rounds them.
 *
 * @internal
 */
import * as Tensor from "@effect-gpu/core/Tensor"
import { roundEight } from "./int8Rounding.js"

/**
 * @internal: where a split attention of one query row keeps its `splits` splits' output rows as int8 blocks
 * of 32: from byte `at` of its result on (past each part's max and sum), every block's 8 words of int8
 * values, split by split, then each block's scale (f32 bits) and the sum of its values; `blocks` a split's
 */
export const roundedRows = (node: Tensor.Tensor, splits: number) => {
  const [q, , v] = node.src
  const parts = q.ne[1] * q.ne[2] * q.ne[3] * splits
  const blocks = (parts / splits) * (v.ne[0] / 32)
  return { at: Math.ceil((Tensor.nbytes(node) + 8 * parts) / 256) * 256, blocks, words: splits * blocks * 10 }
}

/**
 * @internal: WGSL rounding the decode form's output rows (workgroup array ro: HG heads' Dv values from head
 * h0, split sp, over `n` invocations) to int8 blocks of 32 as q8_0 rounds them (roundEight; the scale kept in
 * f32), stored into operand dq with each block's scale and sum where roundedRows says (`all` blocks in all)
 */
export const roundRows = (HG: number, Dv: number, n: number, all: number) =>
  `  workgroupBarrier();
  for (var rb = lid; rb < ${HG * Dv / 32}u; rb += ${n}u) {
    let at = (rb / ${Dv / 32}u) * ${Dv}u + (rb % ${Dv / 32}u) * 32u;
    let bi = (sp * P.q_ne2 + h0) * ${Dv / 32}u + rb;
    var x: array<vec4<f32>, 8>;
    var amax = 0.0;
    for (var c = 0u; c < 8u; c++) {
      x[c] = vec4<f32>(ro[at + 4u * c], ro[at + 4u * c + 1u], ro[at + 4u * c + 2u], ro[at + 4u * c + 3u]);
      let m = abs(x[c]);
      amax = max(amax, max(max(m.x, m.y), max(m.z, m.w)));
    }
${roundEight}
    for (var c = 0u; c < 8u; c++) { st_dq(ix_dq(bi * 8u + c, 0u, 0u, 0u), bitcast<i32>(q[c])); }
    st_dq(ix_dq(${all * 8}u + bi * 2u, 0u, 0u, 0u), bitcast<i32>(amax / 127.0));
    st_dq(ix_dq(${all * 8}u + bi * 2u + 1u, 0u, 0u, 0u), sum);
  }`
