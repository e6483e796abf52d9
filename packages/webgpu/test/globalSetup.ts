/**
 * Probes for a WebGPU adapter once per test run, in a child process (a Dawn instance keeps a process
 * alive), and hands the answer to the tests. Without an adapter the GPU tests skip, and this says so
 * once; under CI=true (CI installs lavapipe) a missing adapter fails the run instead.
 */
import { execFileSync } from "node:child_process"
import * as path from "node:path"
import type { TestProject } from "vitest/node"

const probe = `
import { create, globals } from "webgpu"
Object.assign(globalThis, globals)
const adapter = await create([]).requestAdapter()
console.log(adapter ? "adapter: yes" : "adapter: no")
process.exit(0)
`

export default function setup(project: TestProject) {
  let available = false
  let detail = "requestAdapter returned null"
  try {
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", probe], {
      cwd: path.resolve(__dirname, ".."),
      encoding: "utf8",
      timeout: 60_000,
      stdio: ["ignore", "pipe", "pipe"]
    })
    available = out.includes("adapter: yes")
  } catch (e) {
    detail = String(e)
  }
  if (!available) {
    if (process.env.CI === "true") throw new Error(`CI=true and no WebGPU adapter (${detail})`)
    process.stderr.write(`no WebGPU adapter (${detail}): the WebGPU tests are skipped\n`)
  }
  project.provide("webgpuAdapter", available)
}

declare module "vitest" {
  export interface ProvidedContext {
    webgpuAdapter: boolean
  }
}
