/**
 * A dispatch that carries another dispatch's work in workgroups of its own: a prompt's quantized product
 * copies its weights into f16 before it multiplies them (half_copy, a pass at memory bandwidth), and the
 * product before it (compute-bound, on the tensor cores) can make that copy meanwhile, its workgroups and
 * the copy's alternating over the grid, where two dispatches of their own run one after the other. The two
 * modules become one, the copy's names prefixed so that none clashes, and both entry points' bodies the two
 * sides of one branch in its entry point: each workgroup takes the host's work or the job's by its index.
 * (As functions called from the entry point, the copies came out wrong beside hosts on subgroup matrices
 * on the H100 and right beside lavapipe's hosts, runs ek and en; one entry point keeps each body as it runs
 * alone, not yet checked on a GPU.)
 *
 * @internal
 */
import { fold } from "../wgsl.js"
import type { Kernel, Operand, Param } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { u32 } from "./kernel.js"

/** an entry point as the kernels write it (`entry()` among them): its workgroup size and its builtins */
const ENTRY = /@compute @workgroup_size\(([\d, ]+)\)\nfn main\(([^\n]*)\) \{/

/** @internal: the invocations of a kernel's workgroup, where its entry point is written as ENTRY reads */
export const workgroupSize = (kernel: Kernel): number | undefined => {
  const m = ENTRY.exec(kernel.main)
  return m === null ? undefined : m[1].split(",").reduce((n, x) => n * Number(x), 1)
}

/**
 * @internal: the kernel families a side job rides along with: products and prompt attention, long enough
 * to hide a copy's pass (flash_attn, attention without subgroup matrices, only where copies are forced:
 * without subgroup matrices products copy nothing by default)
 */
export const HOSTS: ReadonlySet<string> = new Set([
  "mmsg",
  "mm4",
  "mm",
  "flash_attn_tiles",
  "flash_attn_mma",
  "flash_attn"
])

/** a WGSL type's size and alignment in bytes (scalars, vectors and arrays of them) */
const layoutOf = (type: string): { readonly size: number; readonly align: number } => {
  const t = type.replace(/\s/g, "")
  if (t === "f16") return { size: 2, align: 2 }
  if (t === "f32" || t === "u32" || t === "i32" || t === "bool") return { size: 4, align: 4 }
  const vec = /^vec([234])<(\w+)>$/.exec(t)
  if (vec !== null) {
    const n = Number(vec[1])
    const e = layoutOf(vec[2]).size
    return { size: n * e, align: (n === 2 ? 2 : 4) * e }
  }
  const arr = /^array<(.+),(\d+)>$/.exec(t)
  if (arr !== null) {
    const e = layoutOf(arr[1])
    const stride = Math.ceil(e.size / e.align) * e.align
    return { size: stride * Number(arr[2]), align: e.align }
  }
  throw new Error(`no size for ${type}`)
}

/**
 * @internal: the bytes of workgroup memory a kernel's module declares (its var<workgroup>s), or undefined
 * where a type is not one layoutOf knows
 */
export const workgroupBytes = (main: string): number | undefined => {
  try {
    return [...main.matchAll(/^var<workgroup>\s+\w+\s*:\s*(.+);\s*$/gm)].reduce((n, m) => n + layoutOf(m[1]).size, 0)
  } catch {
    return undefined
  }
}

/** the builtins of an entry point: attribute, name and type */
const builtins = (list: string) =>
  list.split(",").map((b) => {
    const m = /@builtin\((\w+)\)\s*(\w+)\s*:\s*([\w<>]+)/.exec(b.trim())
    if (m === null) throw new Error(`unexpected entry parameter ${b}`)
    return { attribute: m[1], name: m[2], type: m[3] }
  })

/** the operand accessors and fields the header writes for an operand named `n` (wgsl.ts) */
const accessors = ["ld", "ld4", "st", "st4", "ix", "qwi", "qv", "ldq", "ldi", "ldw", "ldh4", "smst"]

/**
 * the job's WGSL with its operands `a` and `d` renamed, its parameters and its module-scope names prefixed
 * with `j_`: every name its module declares (functions, variables, constants) and the header's accessors of
 * its operands
 */
const renamed = (main: string, params: ReadonlyArray<Param>, operands: Record<string, string>) => {
  const declared = [...main.matchAll(/^(?:fn|var(?:<[^>]*>)?|const|alias)\s+(\w+)/gm)].map((m) => m[1])
  let code = main
  for (const name of declared.filter((n) => n !== "main")) {
    code = code.replace(new RegExp(`\\b${name}\\b`, "g"), `j_${name}`)
  }
  for (const [from, to] of Object.entries(operands)) {
    code = code.replace(new RegExp(`\\b(${accessors.join("|")})_${from}\\b`, "g"), `$1_${to}`)
    code = code.replace(new RegExp(`\\bP\\.${from}_`, "g"), `P.${to}_`)
  }
  for (const p of params) code = code.replace(new RegExp(`\\bP\\.${p.field.name}\\b`, "g"), `P.j_${p.field.name}`)
  return code
}

/**
 * a module's text before its entry point (ENTRY) and the entry point's body (between its braces, the
 * braces counted); undefined where anything follows the entry point or its braces do not close
 */
const split = (main: string): { readonly before: string; readonly body: string } | undefined => {
  const m = ENTRY.exec(main)
  if (m === null) return undefined
  const open = m.index + m[0].length
  let depth = 1
  for (let i = open; i < main.length; i++) {
    if (main[i] === "{") depth++
    else if (main[i] === "}" && --depth === 0) {
      return main.slice(i + 1).trim() === ""
        ? { before: main.slice(0, m.index), body: main.slice(open, i) }
        : undefined
    }
  }
  return undefined
}

/**
 * @internal: `host` carrying `job` (a kernel of operands a and d: half_copy), or undefined where their
 * entry points are not as ENTRY reads them, of one workgroup size, their workgroup memory past `storage`, or
 * the job needs more than its operands and parameters: one dispatch of the host's H workgroups and the
 * job's J spread evenly over its grid (workgroup l is a job's where floor(l J / (H + J)) steps up, so that
 * the copy's traffic runs beside the host's work from its first workgroups to its last; (H + J) J under
 * 2^32). The job's operands keep their own bindings (`binding`), the host's follow its flags; `fallback`
 * is the host alone (where the bindings do not allow the job's)
 */
export const withSideJob = (host: Kernel, job: Kernel, storage: number): Kernel | undefined => {
  const h = ENTRY.exec(host.main)
  const j = ENTRY.exec(job.main)
  if (
    h === null || j === null || workgroupSize(host) !== workgroupSize(job) || job.next !== undefined ||
    (job.enables ?? []).length > 0
  ) {
    return undefined
  }
  // both modules' workgroup memory within the adapter's
  const bytes = [workgroupBytes(host.main), workgroupBytes(job.main)]
  if (bytes.some((b) => b === undefined) || bytes[0]! + bytes[1]! > storage) return undefined
  if (job.operands.some((o) => o.name !== "a" && o.name !== "d")) return undefined
  const hostBuiltins = builtins(h[2])
  const jobBuiltins = builtins(j[2])
  const wid = hostBuiltins.find((b) => b.attribute === "workgroup_id")
  const nwg = hostBuiltins.find((b) => b.attribute === "num_workgroups")
  // the job's workgroup index is reckoned from the dispatch's; the host's own from it
  if (wid === undefined || jobBuiltins.some((b) => b.attribute === "local_invocation_id")) return undefined
  const bound = (o: Operand, name: string): Operand => ({
    ...o,
    name,
    binding: job.vec4 === true && !(job.scalar ?? []).includes(o.name) ? "vec4" : "plain",
    ...(o.name === "d" ? { writes: true } : {})
  })
  const operands = job.operands.map((o) => bound(o, o.name === "a" ? "ja" : "jd"))
  const params = job.params.map((p) => ({ ...p, field: { ...p.field, name: `j_${p.field.name}` } }))
  const jobCode = renamed(job.main, job.params, { a: "ja", d: "jd" })
  const hostParts = split(host.main)
  const jobParts = split(jobCode)
  if (hostParts === undefined || jobParts === undefined) return undefined
  const [hx, hy, hz] = host.workgroups
  const jobs = job.workgroups[0] * job.workgroups[1] * job.workgroups[2]
  const hosts = hx * hy * hz
  // the grid's spread in u32 arithmetic
  if ((hosts + jobs) * jobs >= 2 ** 32) return undefined
  // each side's builtins as its body names them: the workgroup's index and count reckoned, the rest the
  // entry point's (the host's names, the job's own where the host has none)
  const jobLets = jobBuiltins.map((b) =>
    b.attribute === "workgroup_id"
      ? `let ${b.name} = vec3<u32>(side_idx, 0u, 0u);`
      : b.attribute === "num_workgroups"
      ? `let ${b.name} = vec3<u32>(${jobs}u, 1u, 1u);`
      : `let ${b.name} = ${hostBuiltins.find((x) => x.attribute === b.attribute)?.name ?? `side_${b.name}`};`
  ).filter((line) => !/^let (\w+) = \1;$/.test(line))
  const hostLets = [
    `let ${wid.name} = vec3<u32>(side_idx % P.side_hx, (side_idx / P.side_hx) % P.side_hy, side_idx / (P.side_hx * P.side_hy));`,
    ...(nwg === undefined ? [] : [`let ${nwg.name} = vec3<u32>(P.side_hx, P.side_hy, P.side_hz);`])
  ]
  const entryParams = [
    "@builtin(workgroup_id) side_wid: vec3<u32>",
    "@builtin(num_workgroups) side_nwg: vec3<u32>",
    ...hostBuiltins.filter((b) => b !== wid && b !== nwg).map((b) => `@builtin(${b.attribute}) ${b.name}: ${b.type}`),
    ...jobBuiltins.filter((b) =>
      b.attribute !== "workgroup_id" && b.attribute !== "num_workgroups" &&
      !hostBuiltins.some((x) => x.attribute === b.attribute)
    ).map((b) => `@builtin(${b.attribute}) side_${b.name}: ${b.type}`)
  ]
  return KernelSpec.make({
    ...host,
    variant: { ...host.variant, side: job.key },
    operands: [...host.operands, ...operands],
    params: [
      ...host.params,
      ...params,
      u32("side_hx", hx),
      u32("side_hy", hy),
      u32("side_hz", hz),
      u32("side_jobs", jobs),
      u32("side_hosts", hosts)
    ],
    workgroups: fold(hosts + jobs),
    fallback: host,
    main: `${hostParts.before}
${jobParts.before}
@compute @workgroup_size(${h[1]})
fn main(${entryParams.join(", ")}) {
  // workgroup l: the jobs' before it floor(l J / (H + J)); a job's where the next one's count is more. Both
  // bodies stay in the entry point, as each runs alone, behind a branch uniform over the workgroup
  let side_l = side_wid.x + side_wid.y * side_nwg.x + side_wid.z * side_nwg.x * side_nwg.y;
  let side_all = P.side_hosts + P.side_jobs;
  if (side_l >= side_all) { return; }
  let side_before = (side_l * P.side_jobs) / side_all;
  let side_job = ((side_l + 1u) * P.side_jobs) / side_all > side_before;
  let side_idx = select(side_l - side_before, side_before, side_job);
  if (side_job) {
    ${jobLets.join("\n    ")}
${jobParts.body}
  } else {
    ${hostLets.join("\n    ")}
${hostParts.body}
  }
}`
  })
}
