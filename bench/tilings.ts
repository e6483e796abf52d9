/**
 * The tiling arguments the bench scripts share: a subgroup-matrix tiling of f16 mul_mat and a register
 * tiling of the vec4 f32 kernel, as WebGpu.make options. Not project code: measuring aids.
 */

/** "SRxSC:FRxFC:DEPTH": subgroups along result rows x columns, fragments per subgroup, K step */
export const parseTile = (s: string) => {
  const m = /^(\d+)x(\d+):(\d+)x(\d+):(\d+)$/.exec(s)
  if (m === null) throw new Error(`a subgroup-matrix tiling is SRxSC:FRxFC:DEPTH, got ${s}`)
  const [sgRows, sgCols, fragRows, fragCols, depth] = m.slice(1).map(Number)
  return { sgRows, sgCols, fragRows, fragCols, depth }
}

/** "MxN:DEPTH[u]": results per thread along m and n, K step, u for the K loop written out */
export const parseRegs = (s: string) => {
  const m = /^(\d+)x(\d+):(\d+)(u?)$/.exec(s)
  if (m === null) throw new Error(`a register tiling is MxN:DEPTH[u], got ${s}`)
  const [mm, n, depth] = m.slice(1, 4).map(Number)
  return { m: mm, n, depth, unroll: m[4] === "u" }
}
