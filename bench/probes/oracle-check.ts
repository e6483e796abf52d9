/**
 * The models of packages/llm's oracle test against llama.cpp's answers on a GPU machine's WebGPU device
 * (the test runs them on the CPU and lavapipe; this runs the same comparison where subgroup matrices and
 * f16 activations compute the prompt): per model the largest log-probability difference, the positions
 * whose likeliest token is clear, and any disagreement. Exits 1 when a model is off.
 *
 *   tsx oracle-check.ts [ANSWERS]   (ANSWERS: packages/llm/test/oracle/llama.cpp.json from the repository root)
 *
 * ORACLE_OPTIONS, a JSON object of WebGpu.make's options, checks a form not on by default (decode
 * attention in 3 splits, merged by the output projections: '{"attentionDecode":{"splits":3}}').
 */
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import type { Answers } from "../../packages/llm/test/oracle/agreement.js"
import { bound, judge, run } from "../../packages/llm/test/oracle/agreement.js"
import { models } from "../../packages/llm/test/oracle/cases.js"

const answers = JSON.parse(
  readFileSync(process.argv[2] ?? "packages/llm/test/oracle/llama.cpp.json", "utf8")
) as { readonly models: Record<string, Answers> }

const program = Effect.gen(function*() {
  const options = JSON.parse(process.env.ORACLE_OPTIONS ?? "{}") as Omit<WebGpu.Options, "devices">
  const [gpu] = yield* WebGpu.make({ ...options, devices: 1 })
  let failed = 0
  for (const { name, options } of models) {
    const limit = bound(options.dtype)
    const { decisive, disagreements, worst } = yield* Effect.scoped(
      Effect.map(run(gpu, options, answers.models[name].greedy), (ours) => judge(ours, answers.models[name], limit))
    )
    const ok = disagreements.length === 0 && worst < limit && decisive >= 12
    if (!ok) failed++
    console.log(
      JSON.stringify({ model: name, device: gpu.description, worst, bound: limit, decisive, disagreements, ok })
    )
  }
  if (failed > 0) process.exitCode = 1
})

Effect.runPromise(Effect.scoped(program)).catch((e) => {
  console.error(e)
  process.exit(1)
})
