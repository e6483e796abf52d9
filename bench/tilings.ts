/**
 * The tiling arguments the bench scripts share: a subgroup-matrix tiling of f16 mul_mat and a register
 * tiling of the vec4 f32 kernel, as WebGpu.make options. Not project code: measuring aids.
 */

/**
 * "SRxSC:FRxFC:DEPTH[/SPLITS][w]": subgroups along result rows x columns, fragments per subgroup, K step,
 * the workgroups K is split over (default: by the grid), and w for q4_0 / q8_0 blocks loaded a row a lane
 */
export const parseTile = (s: string) => {
  const m = /^(\d+)x(\d+):(\d+)x(\d+):(\d+)(?:\/(\d+))?(w)?$/.exec(s)
  if (m === null) throw new Error(`a subgroup-matrix tiling is SRxSC:FRxFC:DEPTH[/SPLITS][w], got ${s}`)
  const [sgRows, sgCols, fragRows, fragCols, depth] = m.slice(1, 6).map(Number)
  return {
    sgRows,
    sgCols,
    fragRows,
    fragCols,
    depth,
    ...(m[6] !== undefined ? { splits: Number(m[6]) } : {}),
    ...(m[7] !== undefined ? { laneLoads: false } : {})
  }
}

/** "rows" or "columns": which result tiles neighbouring workgroups of a subgroup-matrix product take */
export const parseOrder = (s: string): "rows" | "columns" => {
  if (s !== "rows" && s !== "columns") throw new Error(`a matrix order is rows or columns, got ${s}`)
  return s
}

/** "MxN:DEPTH[u]": results per thread along m and n, K step, u for the K loop written out */
export const parseRegs = (s: string) => {
  const m = /^(\d+)x(\d+):(\d+)(u?)$/.exec(s)
  if (m === null) throw new Error(`a register tiling is MxN:DEPTH[u], got ${s}`)
  const [mm, n, depth] = m.slice(1, 4).map(Number)
  return { m: mm, n, depth, unroll: m[4] === "u" }
}

/**
 * "ROWS:COLUMNS[:STAGE][:a]": the quantized matrix-vector kernel's rows per lane group, most columns, chunks
 * of b staged, and ":a" to stage a's rows too
 */
export const parseDecode = (s: string) => {
  const m = /^(\d+):(\d+)(?::(\d+))?(:a)?(:f32)?(?::s(\d+))?$/.exec(s)
  if (m === null) throw new Error(`a quantized decode shape is ROWS:COLUMNS[:STAGE][:a][:f32][:sSPLIT], got ${s}`)
  return {
    rows: Number(m[1]),
    columns: Number(m[2]),
    ...(m[3] !== undefined ? { stage: Number(m[3]) } : {}),
    ...(m[4] !== undefined ? { staged: true } : {}),
    ...(m[5] !== undefined ? { int8: false } : {}),
    ...(m[6] !== undefined ? { int8Split: Number(m[6]) } : {})
  }
}

/** "SPLITS:BLOCK:SUBGROUPS[:keys|dims][:HEADS]": flash attention's decode form (0 keeps a default) */
export const parseAttention = (s: string) => {
  const m = /^(\d+):(\d+):(\d+)(?::(keys1|keys|dims))?(?::(\d+))?$/.exec(s)
  if (m === null) {
    throw new Error(`a flash attention decode form is SPLITS:BLOCK:SUBGROUPS[:keys|keys1|dims][:HEADS], got ${s}`)
  }
  const [splits, block, subgroups] = m.slice(1, 4).map(Number)
  return {
    ...(m[5] !== undefined ? { heads: Number(m[5]) } : {}),
    ...(splits > 0 ? { splits } : {}),
    ...(block > 0 ? { block } : {}),
    ...(subgroups > 0 ? { subgroups } : {}),
    ...(m[4] !== undefined ? { across: m[4] === "dims" ? "dims" as const : "keys" as const } : {}),
    // keys1: a lane a key (the keys form's default takes four)
    ...(m[4] === "keys1" ? { keyLanes: 1 } : {})
  }
}

/**
 * flash attention's matrix form for prompts: "one-pass|two-pass[:SUBGROUPS][:no-prefetch][:packed][:sSPLITS]"
 * (SUBGROUPS or SPLITS 0: the default)
 */
export const parsePrefillAttention = (s: string) => {
  const m = /^(one-pass|two-pass)(?::(\d+))?(:no-prefetch)?(:packed)?(?::s(\d+))?$/.exec(s)
  if (m === null) {
    throw new Error(
      `a prompt attention form is one-pass|two-pass[:SUBGROUPS][:no-prefetch][:packed][:sSPLITS], got ${s}`
    )
  }
  return {
    form: m[1] as "one-pass" | "two-pass",
    ...(m[2] !== undefined && m[2] !== "0" ? { subgroups: Number(m[2]) } : {}),
    ...(m[3] !== undefined ? { prefetch: false } : {}),
    ...(m[4] !== undefined ? { spread: false } : {}),
    ...(m[5] !== undefined && m[5] !== "0" ? { splits: Number(m[5]) } : {})
  }
}

/** a quantized prompt product's weights: dequantized in its tiles, or copied into f16 first */
export const parseQuantizedPrefill = (s: string): "tiles" | "copy" => {
  if (s !== "tiles" && s !== "copy") throw new Error(`a quantized prompt product's form is tiles|copy, got ${s}`)
  return s
}
