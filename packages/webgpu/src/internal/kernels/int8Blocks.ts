/**
 * The int8 matrix-vector form's block readers: each block type's words of a lane's 64 values (a pair of
 * 32-value blocks, or a quarter of a k-quant block) and their int8 dot products with b's rounded blocks.
 *
 * @internal
 */
import { range } from "./kernel.js"

/** @internal: the weight types of the int8 form */
export type Int8Type = "q4_0" | "q4_1" | "q5_0" | "q8_0" | "q4_K" | "q6_K"

/**
 * a pair of 32-value blocks in words: q4_0 (d, 16 bytes) x 2 = 9 words, the first block's quants from byte
 * 2, the second's from 20; q4_1 (d, m, 16 bytes) x 2 = 10; q5_0 (d, 4 bytes of fifth bits, 16 bytes) x 2
 * = 11, the first block's parts 2 bytes into words, the second's d at byte 22; q8_0 (d, 32 bytes) x 2 = 17,
 * quants from bytes 2 and 36
 */
export const PAIR_WORDS = { q4_0: 9, q4_1: 10, q5_0: 11, q8_0: 17 } as const

/** WGSL: a pair of blocks' dot products with b (y, e0, e1) into `acc`[r], the pair's words in `w` */
export const pairDot = (dtype: keyof typeof PAIR_WORDS, acc: string) => {
  switch (dtype) {
    case "q4_0":
      return `{
  let d0 = unpack2x16float(w[0]).x;
  let d1 = unpack2x16float(w[4]).y;
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 4u; i++) {
    let q = (w[i] >> 16u) | (w[i + 1u] << 16u);
    s0 += dot4I8Packed(q & 0x0f0f0f0fu, y[i]) + dot4I8Packed((q >> 4u) & 0x0f0f0f0fu, y[4u + i]);
    s1 += dot4I8Packed(w[5u + i] & 0x0f0f0f0fu, y[8u + i]) + dot4I8Packed((w[5u + i] >> 4u) & 0x0f0f0f0fu, y[12u + i]);
  }
  // q4_0 values are nibbles - 8: the 8s come off through the block's sum of b's int8 values
  ${acc}[r] += d0 * e0.x * (f32(s0) - 8.0 * e0.y) + d1 * e1.x * (f32(s1) - 8.0 * e1.y);
}`
    case "q4_1":
      return `{
  let dm0 = unpack2x16float(w[0]);
  let dm1 = unpack2x16float(w[5]);
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 4u; i++) {
    s0 += dot4I8Packed(w[1u + i] & 0x0f0f0f0fu, y[i]) + dot4I8Packed((w[1u + i] >> 4u) & 0x0f0f0f0fu, y[4u + i]);
    s1 += dot4I8Packed(w[6u + i] & 0x0f0f0f0fu, y[8u + i]) + dot4I8Packed((w[6u + i] >> 4u) & 0x0f0f0f0fu, y[12u + i]);
  }
  // d * q + m: the minimums through each block's sum of b's int8 values
  ${acc}[r] += e0.x * (dm0.x * f32(s0) + dm0.y * e0.y) + e1.x * (dm1.x * f32(s1) + dm1.y * e1.y);
}`
    case "q5_0":
      return `{
  let d0 = unpack2x16float(w[0]).x;
  let d1 = unpack2x16float(w[5]).y;
  let h0 = (w[0] >> 16u) | (w[1] << 16u);
  let h1 = w[6];
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 4u; i++) {
    let q = (w[1u + i] >> 16u) | (w[2u + i] << 16u);
    s0 += dot4I8Packed((q & 0x0f0f0f0fu) | fifth_bits(h0 >> (4u * i)), y[i]) +
      dot4I8Packed(((q >> 4u) & 0x0f0f0f0fu) | fifth_bits(h0 >> (16u + 4u * i)), y[4u + i]);
    s1 += dot4I8Packed((w[7u + i] & 0x0f0f0f0fu) | fifth_bits(h1 >> (4u * i)), y[8u + i]) +
      dot4I8Packed(((w[7u + i] >> 4u) & 0x0f0f0f0fu) | fifth_bits(h1 >> (16u + 4u * i)), y[12u + i]);
  }
  // q5_0 values are 5 bits - 16: the 16s come off through the block's sum of b's int8 values
  ${acc}[r] += d0 * e0.x * (f32(s0) - 16.0 * e0.y) + d1 * e1.x * (f32(s1) - 16.0 * e1.y);
}`
    case "q8_0":
      return `{
  let d0 = unpack2x16float(w[0]).x;
  let d1 = unpack2x16float(w[8]).y;
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 8u; i++) {
    s0 += dot4I8Packed((w[i] >> 16u) | (w[i + 1u] << 16u), y[i]);
    s1 += dot4I8Packed(w[9u + i], y[8u + i]);
  }
  ${acc}[r] += d0 * e0.x * f32(s0) + d1 * e1.x * f32(s1);
}`
  }
}

/**
 * The k-quants' 64 values at a time: lane pair p of a row reads block p / 4, its run c = p % 4. q4_K (144
 * bytes, whole words): d and dmin, the 12 bytes of 6-bit scales and minimums, and the run's 32 bytes of
 * nibbles (low: sub-block 2c, high: 2c + 1). q6_K (210 bytes: every other block starts 2 bytes into a
 * word, its words put together from two): the run's half (128 values) has 64 bytes of low nibbles and 32 of
 * high bits, its 4 int8 scales (one per 16 values) and d.
 */
export const K_WORDS = { q4_K: 12, q6_K: 26 } as const

/** WGSL: the words of lane pair p's run of row r of weights `n` into w (q4_K, q6_K) */
export const kLoad = (dtype: "q4_K" | "q6_K", n: string, rowWord: string) =>
  dtype === "q4_K"
    ? `{
  let bw = ${rowWord}[r] + (p >> 2u) * 36u;
  for (var k = 0u; k < 4u; k++) { w[k] = qwi_${n}(bw + k); }
  for (var k = 0u; k < 8u; k++) { w[4u + k] = qwi_${n}(bw + 4u + 8u * (p & 3u) + k); }
}`
    : `{
  let bb = ${rowWord}[r] * 4u + (p >> 2u) * 210u;
  let odd = (bb & 2u) != 0u;
  let hf = (p >> 1u) & 1u;
  var raw: array<u32, 17>;
  let lw = (bb >> 2u) + 16u * hf;
  for (var k = 0u; k < 17u; k++) { raw[k] = qwi_${n}(lw + k); }
  for (var k = 0u; k < 16u; k++) { w[k] = select(raw[k], (raw[k] >> 16u) | (raw[k + 1u] << 16u), odd); }
  let hw = (bb >> 2u) + 32u + 8u * hf;
  for (var k = 0u; k < 9u; k++) { raw[k] = qwi_${n}(hw + k); }
  for (var k = 0u; k < 8u; k++) { w[16u + k] = select(raw[k], (raw[k] >> 16u) | (raw[k + 1u] << 16u), odd); }
  let sw = (bb >> 2u) + 48u + 2u * hf + (p & 1u);
  let s0 = qwi_${n}(sw);
  w[24] = select(s0, (s0 >> 16u) | (qwi_${n}(sw + 1u) << 16u), odd);
  let dw = qwi_${n}((bb >> 2u) + 52u);
  w[25] = select(dw, dw >> 16u, odd);
}`

/** WGSL: a k-quant run's dot products with b's two blocks (y, e0, e1) into `acc`[r] */
export const kDot = (dtype: "q4_K" | "q6_K", acc: string) =>
  dtype === "q4_K"
    ? `{
  let dm = unpack2x16float(w[0]);
  let j = 2u * (p & 3u);
  let sm0 = scale_min_k4(j, w[1], w[2], w[3]);
  let sm1 = scale_min_k4(j + 1u, w[1], w[2], w[3]);
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 8u; i++) {
    s0 += dot4I8Packed(w[4u + i] & 0x0f0f0f0fu, y[i]);
    s1 += dot4I8Packed((w[4u + i] >> 4u) & 0x0f0f0f0fu, y[8u + i]);
  }
  // d * scale * q - dmin * min: the minimums come off through each block's sum of b's int8 values
  ${acc}[r] += e0.x * (dm.x * sm0.x * f32(s0) - dm.y * sm0.y * e0.y) +
    e1.x * (dm.x * sm1.x * f32(s1) - dm.y * sm1.y * e1.y);
}`
    : `{
  let d = unpack2x16float(w[25]).x;
  let sh = 4u * (p & 1u);
  let sc = vec4<f32>(${range(4).map((i) => `f32(extractBits(bitcast<i32>(w[24]), ${8 * i}u, 8u))`).join(", ")});
  // each 16 values' own scale: the first block's halves, then the second's
  var s = vec4<i32>();
  for (var i = 0u; i < 4u; i++) {
    s.x += dot4I8Packed(q6_values(w[i], w[16u + i], sh, sh), y[i]);
    s.y += dot4I8Packed(q6_values(w[4u + i], w[20u + i], sh, sh), y[4u + i]);
    s.z += dot4I8Packed(q6_values(w[8u + i], w[16u + i], sh, sh + 2u), y[8u + i]);
    s.w += dot4I8Packed(q6_values(w[12u + i], w[20u + i], sh, sh + 2u), y[12u + i]);
  }
  ${acc}[r] += d * (e0.x * (sc.x * f32(s.x) + sc.y * f32(s.y)) + e1.x * (sc.z * f32(s.z) + sc.w * f32(s.w)));
}`

/**
 * WGSL helpers: q5_0's fifth bits of four values (the low 4 bits of h) at bit 4 of their bytes; q4_K's
 * 6-bit scale and minimum j; q6_K's four values as int8
 */
export const helpers = (dtype: Int8Type) =>
  dtype === "q5_0"
    ? `fn fifth_bits(h: u32) -> u32 {
  return ((h & 1u) << 4u) | ((h & 2u) << 11u) | ((h & 4u) << 18u) | ((h & 8u) << 25u);
}`
    : dtype === "q4_K"
    ? `// ggml's get_scale_min_k4 over the scale bytes in words s0, s1, s2
fn scale_min_k4(j: u32, s0: u32, s1: u32, s2: u32) -> vec2<f32> {
  let at = (j & 3u) * 8u;
  let a = (s0 >> at) & 0xffu;
  let b = (s1 >> at) & 0xffu;
  let c = (s2 >> at) & 0xffu;
  return select(
    vec2<f32>(f32(a & 63u), f32(b & 63u)),
    vec2<f32>(f32((c & 15u) | ((a >> 6u) << 4u)), f32((c >> 4u) | ((b >> 6u) << 4u))),
    j >= 4u
  );
}`
    : dtype === "q6_K"
    ? `// four q6_K values (low nibbles of l at ls, high bits of h at hs) - 32, as int8: 6-bit values with bit 5
// flipped are the values - 32 in 6-bit two's complement, bit 5 copied into bits 6 and 7 widens them
fn q6_values(l: u32, h: u32, ls: u32, hs: u32) -> u32 {
  let t = (((l >> ls) & 0x0f0f0f0fu) | (((h >> hs) & 0x03030303u) << 4u)) ^ 0x20202020u;
  let m = t & 0x20202020u;
  return t | (m << 1u) | (m << 2u);
}`
    : ""
