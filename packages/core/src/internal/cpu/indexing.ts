/**
 * Indexing reference kernels: get_rows (quantized tables dequantized) and set_rows (rows converted to
 * the destination's type). An index outside the table reads zeros, a row outside the destination is
 * dropped, as on every backend (the host's indices are checked when they are set).
 *
 * @internal
 */
import type { Acc } from "./acc.js"
import { eachRow } from "./acc.js"

/** @internal */
export const getRows = (dst: Acc, a: Acc, idx: Acc): void => {
  const row = new Float64Array(a.ne0)
  return eachRow(dst, (i1, i2, i3) => {
    const r = idx.get(i1, i2, i3, 0)
    const inside = r >= 0 && r < a.ne1
    if (inside) a.row(r, i2, i3, row)
    for (let i = 0; i < dst.ne0; i++) dst.set(i, i1, i2, i3, inside ? row[i] : 0)
  })
}

/** @internal */
export const setRows = (dst: Acc, s: Acc, idx: Acc): void =>
  eachRow(s, (i1, i2, i3) => {
    const r = idx.get(i1, i2 % idx.ne1, i3 % idx.ne2, 0)
    if (r < 0 || r >= dst.ne1) return
    for (let i = 0; i < s.ne0; i++) dst.set(i, r, i2, i3, s.get(i, i1, i2, i3))
  })
