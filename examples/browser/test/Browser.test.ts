import { Cpu } from "@effect-gpu/core"
import { Fixture, Llm } from "@effect-gpu/llm"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"
import { build, preview } from "vite"
import { quickstart } from "../../quickstart/program.js"
import { generate } from "../src/generate.js"

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..")
const dist = path.join(root, "dist")
/** Debian's chromium (.ci/run installs it) */
const browserPath = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => fs.existsSync(p))
/** WebGPU in headless Chromium without a GPU: SwiftShader's Vulkan (without these flags it has none) */
const flags = [
  "--enable-unsafe-webgpu",
  "--enable-features=Vulkan",
  "--use-vulkan=swiftshader",
  "--use-webgpu-adapter=swiftshader",
  "--no-sandbox"
]

/** a GGUF file of the user's: a llama model with a SentencePiece vocabulary, in q8_0 (the page's own is qwen3) */
const own = Fixture.make({ ...Fixture.demo, architecture: "llama", tokenizer: "llama", dtype: "q8_0", seed: 11 })
const ownPrompt = "Once upon a time"

/** what the page shows after running a picked file: the loading line and the tokens */
interface Picked {
  readonly loading: string
  readonly tokens: Array<number> | "failed"
}

/**
 * the page in headless Chromium with these flags: its state, device line, note, and numbers; then each of
 * `picks` (files) chosen in the file input and run
 */
const open = async (args: ReadonlyArray<string>, screenshot?: string, picks: ReadonlyArray<string> = []) => {
  if (!fs.existsSync(path.join(dist, "index.html"))) await build({ root, configFile: false, logLevel: "warn" })
  const server = await preview({ root, configFile: false, logLevel: "warn", preview: { port: 0, host: "127.0.0.1" } })
  const browser = await chromium.launch({ executablePath: browserPath!, args: [...args] })
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 760 } })
    await page.goto(server.resolvedUrls!.local[0])
    await page.waitForSelector("body[data-state]", { timeout: 90_000 })
    const shown = {
      state: await page.getAttribute("body", "data-state"),
      device: (await page.textContent("#device")) ?? "",
      note: (await page.isVisible("#note")) ? await page.textContent("#note") : undefined,
      values: JSON.parse((await page.getAttribute("#result", "data-values")) ?? "[]") as Array<number>,
      tokens: JSON.parse((await page.getAttribute("#tokens", "data-tokens")) ?? "[]") as Array<number>,
      speed: (await page.textContent("#speed")) ?? ""
    }
    const picked: Array<Picked> = []
    for (const file of picks) {
      await page.setInputFiles("#model", file)
      await page.fill("#prompt", ownPrompt)
      await page.click("#run")
      await page.waitForSelector("#own[data-tokens]", { timeout: 90_000 })
      const tokens = (await page.getAttribute("#own", "data-tokens"))!
      picked.push({
        loading: (await page.textContent("#loading")) ?? "",
        tokens: tokens === "failed" ? "failed" : JSON.parse(tokens) as Array<number>
      })
    }
    if (screenshot !== undefined) await page.screenshot({ path: screenshot, fullPage: true })
    return { ...shown, picked }
  } finally {
    await browser.close()
    await new Promise((resolve) => server.httpServer.close(resolve))
  }
}

/** whether the browser tests can run: under CI a missing chromium fails */
const haveBrowser = () => {
  if (browserPath !== undefined) return true
  if (process.env.CI === "true") assert.fail("no chromium at /usr/bin/chromium (.ci/run installs Debian's chromium)")
  console.log("no chromium here: the headless browser tests are skipped")
  return false
}

/** the quickstart on the CPU backend in Node */
const onCpu = () => Effect.runPromise(quickstart.pipe(Effect.provide(Cpu.layer())))

/** the page's model's greedy tokens on the CPU backend in Node */
const tokensOnCpu = () => Effect.runPromise(generate(() => {}).pipe(Effect.provide(Cpu.layer())))

/** the picked file's greedy continuation of the prompt on the CPU backend in Node, from its bytes */
const ownOnCpu = () =>
  Effect.runPromise(
    Effect.gen(function*() {
      const model = yield* Llm.fromBytes(own, { size: 512 })
      const out = yield* Stream.runCollect(model.generate(ownPrompt, { temperature: 0, maxTokens: 32 }))
      return Chunk.toArray(out).map((g) => g.token)
    }).pipe(Effect.scoped, Effect.provide(Cpu.layer()))
  )

describe("the browser example", () => {
  it("builds with vite and no configuration, without Dawn", async () => {
    await build({ root, configFile: false, logLevel: "warn" })
    assert.isTrue(fs.existsSync(path.join(dist, "index.html")))
    const js = fs.readdirSync(path.join(dist, "assets")).filter((f) => f.endsWith(".js"))
      .map((f) => fs.readFileSync(path.join(dist, "assets", f), "utf8")).join("\n")
    // the page's code is there; Dawn's loader (the Node-only import of the webgpu package) is not
    assert.include(js, "navigator.gpu is undefined")
    assert.notInclude(js, "npm install webgpu@")
  }, 120_000)

  it("computes on WebGPU in headless Chromium what the CPU backend computes in Node", async () => {
    if (!haveBrowser()) return
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), "browser-"))
    const picks = [path.join(folder, "notes.gguf"), path.join(folder, "llama-q8_0.gguf")]
    fs.writeFileSync(picks[0], "not a model")
    fs.writeFileSync(picks[1], own)
    const shown = await open(flags, path.join(dist, "screenshot.png"), picks)
    assert.strictEqual(shown.state, "done", shown.device)
    // SwiftShader's adapter: the page ran on WebGPU, not on its CPU fallback
    assert.include(shown.device, "(GPU)")
    assert.isUndefined(shown.note)
    const cpu = await onCpu()
    assert.strictEqual(shown.values.length, cpu.result.length)
    shown.values.forEach((v, i) => assert.closeTo(v, cpu.result[i], 1e-5, `value ${i}`))
    // a model's 16 greedy tokens, generated on the page's WebGPU device, are the CPU backend's
    assert.include(shown.speed, "16 tokens on WebGPU", shown.speed)
    assert.deepStrictEqual(shown.tokens, (await tokensOnCpu()).tokens)
    // a GGUF file picked in the page, read from its File a slice at a time: the greedy continuation of a
    // text prompt is the CPU backend's in Node; a file that is not GGUF says so
    const [foreign, picked] = shown.picked
    const expected = await ownOnCpu()
    assert.isAbove(expected.length, 0)
    assert.include(picked.loading, `llama-q8_0.gguf: ${expected.length} tokens on WebGPU`, picked.loading)
    assert.deepStrictEqual(picked.tokens, expected)
    assert.strictEqual(foreign.tokens, "failed")
    assert.include(foreign.loading, "failed: notes.gguf: not a GGUF file", foreign.loading)
    assert.notInclude(foreign.loading, "FiberFailure")
  }, 180_000)

  it("falls back to the CPU backend with a visible note where the browser gives no adapter", async () => {
    if (!haveBrowser()) return
    const shown = await open(["--no-sandbox"])
    assert.strictEqual(shown.state, "done", shown.device)
    assert.include(shown.device, "(CPU)")
    assert.include(shown.note, "the CPU backend ran instead")
    assert.deepStrictEqual(shown.values, (await onCpu()).result)
    assert.deepStrictEqual(shown.tokens, (await tokensOnCpu()).tokens)
  }, 180_000)
})
