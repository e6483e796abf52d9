/**
 * How a result is compared with a reference, as ggml's test-backend-ops compares: the normalized mean
 * squared error under a bound, exact equality, or (for top_k, whose order within a row is free) the same
 * set of values in each row.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export type Rule = "nmse" | "exact" | "set_per_row"

/**
 * @since 0.1.0
 * @category models
 */
export interface Result {
  readonly passed: boolean
  /** what was measured: the NMSE, or the count of differing elements or rows */
  readonly error: number
  readonly detail: string
}

/**
 * The normalized mean squared error of `ours` against `ref`: sum((ours - ref)^2) / sum(ref^2).
 *
 * @since 0.1.0
 * @category comparison
 */
export const nmse = (ours: ArrayLike<number>, ref: ArrayLike<number>): number => {
  let num = 0
  let den = 0
  for (let i = 0; i < ref.length; i++) {
    const d = ours[i] - ref[i]
    num += d * d
    den += ref[i] * ref[i]
  }
  return den === 0 ? (num === 0 ? 0 : Infinity) : num / den
}

/**
 * Compares by `rule`: `bound` is the largest NMSE that passes; `rowLength` is the length of a row, for
 * `set_per_row`.
 *
 * @since 0.1.0
 * @category comparison
 */
export const compare = (
  rule: Rule,
  ours: ArrayLike<number>,
  ref: ArrayLike<number>,
  options: { readonly bound: number; readonly rowLength: number }
): Result => {
  if (ours.length !== ref.length) {
    return { passed: false, error: Infinity, detail: `length ${ours.length} != ${ref.length}` }
  }
  switch (rule) {
    case "nmse": {
      const e = nmse(ours, ref)
      const nan = Array.prototype.some.call(ours, (x: number) => Number.isNaN(x))
      return { passed: !nan && e <= options.bound, error: e, detail: `nmse ${e.toExponential(3)}${nan ? ", NaN" : ""}` }
    }
    case "exact": {
      let bad = 0
      for (let i = 0; i < ref.length; i++) if (!Object.is(ours[i], ref[i]) && ours[i] !== ref[i]) bad++
      return { passed: bad === 0, error: bad, detail: `${bad} elements differ` }
    }
    case "set_per_row": {
      const k = options.rowLength
      let bad = 0
      for (let r = 0; r < ref.length / k; r++) {
        const a = Array.from({ length: k }, (_, i) => ours[r * k + i]).sort((x, y) => x - y)
        const b = Array.from({ length: k }, (_, i) => ref[r * k + i]).sort((x, y) => x - y)
        if (a.some((x, i) => x !== b[i])) bad++
      }
      return { passed: bad === 0, error: bad, detail: `${bad} rows differ` }
    }
  }
}
