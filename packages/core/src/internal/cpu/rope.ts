/**
 * The reference of rotary position embedding with ggml's extensions: frequency factors, YaRN (a ramp
 * between interpolated and extrapolated angles, and a magnitude scale) and the multi-section modes 8
 * (mrope) and 40 (imrope), whose pairs take one of four positions per token.
 *
 * @internal
 */
import type { RopeParams } from "../../Op.js"
import { ropeYarnCorrDims } from "../../Op.js"
import type { Acc } from "./acc.js"
import { eachRow } from "./acc.js"

type RopeOp = RopeParams

/** @internal: the angle and the magnitude of pair `i` at position `p` (cos and sin are scaled by it) */
export const angle = (op: RopeOp, i: number, p: number, factor: number): readonly [number, number] => {
  const thetaExt = (p * op.freqBase ** ((-2 * i) / op.nDims)) / factor
  const thetaInt = op.freqScale * thetaExt
  if (op.extFactor === 0) return [thetaInt, op.attnFactor]
  const { high, low } = ropeYarnCorrDims(op)
  const ramp = 1 - Math.min(1, Math.max(0, (i - low) / Math.max(0.001, high - low)))
  const mix = ramp * op.extFactor
  return [thetaInt * (1 - mix) + thetaExt * mix, op.attnFactor * (1 + 0.1 * Math.log(1 / op.freqScale))]
}

/** @internal: which of a token's four positions pair `i` takes, in modes 8 and 40 */
export const section = (op: RopeOp, i: number): number => {
  const [s0, s1, s2, s3] = op.sections
  const sec = i % (s0 + s1 + s2 + s3)
  if (op.mode === 8) return sec < s0 ? 0 : sec < s0 + s1 ? 1 : sec < s0 + s1 + s2 ? 2 : 3
  if (sec % 3 === 1 && sec < 3 * s1) return 1
  if (sec % 3 === 2 && sec < 3 * s2) return 2
  if (sec % 3 === 0 && sec < 3 * s0) return 0
  return 3
}

/** @internal */
export const rope = (dst: Acc, a: Acc, pos: Acc, factors: Acc | undefined, op: RopeOp): void => {
  const half = op.nDims / 2
  const multi = op.mode === 8 || op.mode === 40
  const nTokens = a.ne2
  return eachRow(a, (i1, i2, i3) => {
    const x = a.row(i1, i2, i3)
    for (let i = 0; i < half; i++) {
      const p = pos.get(multi ? i2 + section(op, i) * nTokens : i2, 0, 0, 0)
      const [theta, mscale] = angle(op, i, p, factors === undefined ? 1 : factors.get(i, 0, 0, 0))
      const c = Math.cos(theta) * mscale
      const s = Math.sin(theta) * mscale
      const [j0, j1] = op.mode === 0 ? [2 * i, 2 * i + 1] : [i, i + half]
      dst.set(j0, i1, i2, i3, x[j0] * c - x[j1] * s)
      dst.set(j1, i1, i2, i3, x[j0] * s + x[j1] * c)
    }
    for (let i = op.nDims; i < a.ne0; i++) dst.set(i, i1, i2, i3, x[i])
  })
}
