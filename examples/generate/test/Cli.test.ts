import { Cpu } from "@effect-gpu/core"
import { type ChatTemplate, Fixture, Llm } from "@effect-gpu/llm"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { spawnSync } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))
const tsx = fileURLToPath(new URL("../../../node_modules/.bin/tsx", import.meta.url))
const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}, input?: string) =>
  spawnSync(tsx, [main, ...args], {
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, XDG_RUNTIME_DIR: "/tmp", ...env },
    ...(input !== undefined ? { input } : {})
  })

const folder = mkdtempSync(join(tmpdir(), "generate-"))
const model = join(folder, "model.gguf")
const bytes = Fixture.make({
  architecture: "llama",
  dtype: "q8_0",
  hidden: 128,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  ffn: 256,
  vocab: 300
})
writeFileSync(model, bytes)

describe("pnpm generate", () => {
  it("--json prints one JSON object and nothing else; the same tokens on the CPU as on the best device", () => {
    const args = [
      "--model",
      model,
      "--prompt-tokens",
      "1,40,271,7",
      "--greedy",
      "--max-tokens",
      "6",
      "--ignore-eos",
      "--json"
    ]
    const out = run([...args, "--device", "cpu"])
    assert.strictEqual(out.status, 0, out.stderr)
    const lines = out.stdout.trim().split("\n")
    assert.strictEqual(lines.length, 1, out.stdout)
    const json = JSON.parse(lines[0]) as {
      tokens: Array<number>
      text: string
      prompt_tok_s: number
      gen_tok_s: number
    }
    assert.strictEqual(json.tokens.length, 6)
    assert.isAbove(json.prompt_tok_s, 0)
    assert.isAbove(json.gen_tok_s, 0)
    const best = JSON.parse(run(args).stdout.trim()) as { tokens: Array<number> }
    assert.deepStrictEqual(best.tokens, json.tokens)
  }, 120_000)

  it("streams text after a loading bar and reports speeds; bad flags and files fail with a reason", () => {
    const out = run(["--model", model, "--prompt", "the rain", "--max-tokens", "4", "--device", "cpu", "--seed", "1"])
    assert.strictEqual(out.status, 0, out.stderr)
    assert.isTrue(out.stdout.startsWith("the rain"), out.stdout)
    // not a terminal: the bar's last state alone, not its redraws
    assert.strictEqual(out.stderr.split("loading [").length - 1, 1, out.stderr)
    assert.include(out.stderr, "loading [##############################]")
    assert.match(out.stderr, /prompt: \d+ tokens, [\d.]+ tok\/s; generated: \d+ tokens, [\d.]+ tok\/s/)
    const bad = run(["--max-tokens", "zero"])
    assert.strictEqual(bad.status, 2)
    assert.include(bad.stderr, "--max-tokens takes a number")
    const missing = run(["--model", join(folder, "missing.gguf")])
    assert.strictEqual(missing.status, 1)
    assert.include(missing.stderr, "cannot be opened")
    assert.notInclude(missing.stderr, "    at ")
  }, 120_000)

  it("--chat: the prompt as the user's message in the model's chat template, the reply alone", async () => {
    const asked = ["--model", model, "--chat", "--system", "be brief", "--prompt", "hello there", "--greedy"]
    const more = ["--max-tokens", "5", "--ignore-eos", "--device", "cpu", "--json"]
    const out = run([...asked, ...more])
    assert.strictEqual(out.status, 0, out.stderr)
    const messages = [{ role: "system", content: "be brief" }, { role: "user", content: "hello there" }]
    const options = { temperature: 0, maxTokens: 5, ignoreEndOfGeneration: true }
    const reply = (template: ChatTemplate.Name) =>
      Effect.runPromise(
        Effect.gen(function*() {
          const m = yield* Llm.fromBytes(bytes, { size: 256 })
          return Chunk.toArray(yield* Stream.runCollect(m.chat(messages, { ...options, template }))).map((g) => g.token)
        }).pipe(Effect.scoped, Effect.provide(Cpu.layer()))
      )
    // the fixture has no template: ChatML
    assert.deepStrictEqual((JSON.parse(out.stdout) as { tokens: Array<number> }).tokens, await reply("chatml"))
    const named = run([...asked, "--chat-template", "llama3", ...more])
    assert.deepStrictEqual((JSON.parse(named.stdout) as { tokens: Array<number> }).tokens, await reply("llama3"))
    // (the two formats' replies differ, so the format asked for is the one used)
    assert.notDeepEqual(await reply("llama3"), await reply("chatml"))
    for (
      const [args, says] of [
        [["--system", "x"], "--system goes with --chat"],
        [["--chat", "--chat-template", "jinja"], "--chat-template takes one of chatml"],
        [["--chat", "--prompt-tokens", "1,2"], "--chat takes text"],
        [["--conversation", "--json"], "--conversation prints its replies as they come"]
      ] as const
    ) {
      const bad = run(args)
      assert.strictEqual(bad.status, 2, bad.stderr)
      assert.include(bad.stderr, says)
    }
  }, 120_000)

  it("--conversation: a message a line from stdin, each reply in the history of the next", async () => {
    const out = run(
      ["--model", model, "--conversation", "--system", "be brief", "--greedy", "--max-tokens", "4", "--ignore-eos"]
        .concat(["--device", "cpu"]),
      {},
      "hello there\n\nwho are you\n"
    )
    assert.strictEqual(out.status, 0, out.stderr)
    // the same turns in-process: each reply's text kept as the assistant's message
    const turns = await Effect.runPromise(
      Effect.gen(function*() {
        const m = yield* Llm.fromBytes(bytes, { size: 256 })
        const history: Array<ChatTemplate.Message> = [{ role: "system", content: "be brief" }]
        const done: Array<{ reply: string; prompt: number }> = []
        for (const message of ["hello there", "who are you"]) {
          history.push({ role: "user", content: message })
          const prompt = (yield* m.chatPrompt(history)).length
          const reply = Chunk.toArray(
            yield* Stream.runCollect(m.chat(history, { temperature: 0, maxTokens: 4, ignoreEndOfGeneration: true }))
          ).map((g) => g.text).join("")
          history.push({ role: "assistant", content: reply })
          done.push({ reply, prompt })
        }
        return done
      }).pipe(Effect.scoped, Effect.provide(Cpu.layer()))
    )
    assert.strictEqual(out.stdout, turns.map((t) => `${t.reply}\n`).join(""))
    // each turn's prompt is the whole history's (the second's holding the first turn), the second reusing
    // the first's cached positions
    const counts = [...out.stderr.matchAll(/\(prompt: (\d+) tokens, (\d+) of them reused; 4 generated\)/g)]
      .map((m) => [Number(m[1]), Number(m[2])])
    assert.deepStrictEqual(counts.map(([prompt]) => prompt), turns.map((t) => t.prompt), out.stderr)
    assert.strictEqual(counts[0][1], 0)
    assert.isAbove(counts[1][1], turns[0].prompt / 2)
  }, 120_000)

  it("starts WebGPU only where the run may use it: not for --help, bad flags or --device cpu", () => {
    // a WebGPU setting that fails WebGPU's start: a run that starts it fails on it
    const broken = { EFFECT_GPU_WEBGPU_DEVICES: "two" }
    const best = run(["--model", model, "--prompt-tokens", "1,2", "--max-tokens", "1"], broken)
    assert.strictEqual(best.status, 1)
    assert.include(best.stderr, "EFFECT_GPU_WEBGPU_DEVICES")
    assert.strictEqual(best.stdout, "")
    const help = run(["--help"], broken)
    assert.strictEqual(help.status, 0, help.stderr)
    assert.include(help.stdout, "--device cpu|webgpu")
    const bad = run(["--device", "tpu"], broken)
    assert.strictEqual(bad.status, 2)
    assert.include(bad.stderr, "--device takes cpu or webgpu, not tpu")
    assert.notInclude(bad.stderr, "EFFECT_GPU_WEBGPU_DEVICES")
    const cpu = run(
      ["--model", model, "--prompt-tokens", "1,2", "--max-tokens", "2", "--device", "cpu", "--json"],
      broken
    )
    assert.strictEqual(cpu.status, 0, cpu.stderr)
    assert.strictEqual((JSON.parse(cpu.stdout) as { tokens: Array<number> }).tokens.length, 2)
  }, 120_000)
})
