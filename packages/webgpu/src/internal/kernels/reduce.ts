/**
 * Workgroup reductions shared by the kernels that reduce across a workgroup (rows, groups, attention):
 * `reduce_sum` and `reduce_max` over the workgroup's RW invocations, in registers over subgroups where
 * the device has them (2 barriers), else through a shared-memory tree (log2(RW) barriers).
 *
 * @internal
 */
import { SUBGROUP_LANES } from "./kernel.js"

/**
 * a workgroup reduction `reduce_<name>` with `combine(x, y)`, over subgroups where `sub` (the subgroup
 * builtin) is given, else through the shared array `red`
 */
const reduction = (name: string, combine: (x: string, y: string) => string, sub: string | undefined) =>
  sub !== undefined
    ? `
fn reduce_${name}(lid: u32, v: f32) -> f32 {
  let s = ${sub}(v);
  if (sgl == 0u) { red[lid / sgs] = s; }
  workgroupBarrier();
  var r = red[0];
  for (var k = 1u; k < RW / sgs; k++) { r = ${combine("r", "red[k]")}; }
  workgroupBarrier();
  return r;
}`
    : `
fn reduce_${name}(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = RW / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = ${combine("red[lid]", "red[lid + s]")}; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}`

/**
 * @internal: WGSL declarations for a workgroup of `wg` invocations (a power of two): the constant RW, the
 * shared arrays `red` and `redi`, and reduce_sum / reduce_max (every invocation must call them; the
 * subgroup form needs `entry(wg, true)`)
 */
export const workgroupReductions = (wg: number, subgroups: boolean): string =>
  [
    `const RW = ${wg}u;`,
    `var<workgroup> red: array<f32, ${wg}>;`,
    `var<workgroup> redi: array<u32, ${wg}>;`,
    subgroups ? SUBGROUP_LANES : "",
    reduction("sum", (x, y) => `${x} + ${y}`, subgroups ? "subgroupAdd" : undefined),
    reduction("max", (x, y) => `max(${x}, ${y})`, subgroups ? "subgroupMax" : undefined)
  ].join("\n")

/**
 * @internal: WGSL: the ALiBi slope of head `h` (1 without max_bias) as ggml computes it, into `slope`;
 * reads the parameters max_bias and n_head_log2
 */
export const alibiSlope = (h: string): string => `
  var slope = 1.0;
  if (P.max_bias > 0.0) {
    let hf = f32(${h});
    let hl = f32(P.n_head_log2);
    if (${h} < P.n_head_log2) { slope = pow(pow(2.0, -P.max_bias / hl), hf + 1.0); }
    else { slope = pow(pow(2.0, -(P.max_bias / 2.0) / hl), 2.0 * (hf - hl) + 1.0); }
  }`

/** @internal: ggml's n_head_log2 of `heads`: the largest power of two not above it */
export const headLog2 = (heads: number): number => 2 ** Math.floor(Math.log2(Math.max(heads, 1)))
