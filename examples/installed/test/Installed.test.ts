import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.join(here, "../../..")
const run = (cmd: string, args: ReadonlyArray<string>, cwd: string) =>
  execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/** a dependency the workspace already has, by its directory in pnpm's store: the install needs no registry */
const stored = (name: string, version: string) => {
  const dir = path.join(root, "node_modules/.pnpm", `${name.replace("/", "+")}@${version}`, "node_modules", name)
  if (!fs.existsSync(dir)) throw new Error(`${name}@${version} is not in the workspace's store (${dir})`)
  return `file:${dir}`
}

describe("the packed libraries, installed with npm outside the workspace", () => {
  it("run under plain node: on the CPU, and on WebGPU where an adapter exists", () => {
    run("pnpm", ["build"], root)
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "effect-gpu-installed-"))
    try {
      const tarballs = Object.fromEntries(["core", "webgpu", "testing"].map((pkg) => {
        const out = run("pnpm", ["pack", "--pack-destination", work], path.join(root, "packages", pkg)).trim()
        const tarball = out.split("\n").filter((l) => l.endsWith(".tgz")).pop()!
        const files = run("tar", ["-tzf", tarball], work)
        // dist, README and LICENSE; no sources or tests
        assert.include(files, "package/dist/index.js", pkg)
        assert.include(files, "package/dist/index.d.ts", pkg)
        assert.include(files, "package/LICENSE", pkg)
        assert.notInclude(files, "package/src/", pkg)
        assert.notInclude(files, "package/test/", pkg)
        return [`@effect-gpu/${pkg}`, `file:${tarball}`]
      }))
      fs.writeFileSync(
        path.join(work, "package.json"),
        JSON.stringify({
          name: "installed",
          private: true,
          type: "module",
          dependencies: {
            ...tarballs,
            "effect": stored("effect", "3.22.4"),
            "webgpu": stored("webgpu", "0.6.2"),
            "fast-check": stored("fast-check", "3.23.2"),
            "@webgpu/types": stored("@webgpu/types", "0.1.74")
          }
        })
      )
      fs.copyFileSync(path.join(here, "../program.mjs"), path.join(work, "program.mjs"))
      // an empty npm cache and --offline: everything comes from the tarballs and the workspace's store
      execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error"], {
        cwd: work,
        env: { ...process.env, npm_config_cache: path.join(work, ".npm-cache") },
        stdio: ["ignore", "pipe", "pipe"]
      })
      // the packed manifest points at dist, with types
      const manifest = JSON.parse(
        fs.readFileSync(path.join(work, "node_modules/@effect-gpu/webgpu/package.json"), "utf8")
      )
      assert.deepStrictEqual(manifest.exports["."], { types: "./dist/index.d.ts", default: "./dist/index.js" })
      assert.strictEqual(manifest.imports["#dawn"].browser, "./dist/internal/dawn.browser.js")
      assert.strictEqual(manifest.peerDependencies.effect, "^3.22.4")

      // y = a^T b for a = [[1, 2, 3], [4, 5, 6]] and b = [[1, 0, 1], [0, 1, 0]] (rows of K = 3)
      const a = [1, 2, 3, 4, 5, 6]
      const b = [1, 0, 1, 0, 1, 0]
      const expected = [0, 1].flatMap((j) =>
        [0, 1].map((i) => [0, 1, 2].reduce((s, k) => s + a[i * 3 + k] * b[j * 3 + k], 0))
      )
      const cpu = JSON.parse(run("node", ["program.mjs", "cpu"], work))
      assert.strictEqual(cpu.type, "CPU")
      assert.deepStrictEqual(cpu.result, expected)
      assert.strictEqual(cpu.testGpu, "function")

      let gpu: { type: string; result: Array<number> } | undefined
      try {
        gpu = JSON.parse(run("node", ["program.mjs", "webgpu"], work))
      } catch (e) {
        const message = String((e as { stderr?: string }).stderr ?? e)
        if (process.env.CI === "true" || !message.includes("NoAdapter")) throw e
        console.log(`no WebGPU adapter here: the installed WebGPU run is skipped (${message.trim()})`)
      }
      if (gpu !== undefined) {
        assert.strictEqual(gpu.type, "GPU")
        assert.deepStrictEqual(gpu.result, expected)
      }
    } finally {
      fs.rmSync(work, { recursive: true, force: true })
    }
  }, 240_000)
})
