/**
 * The page: runs the quickstart on navigator.gpu where the browser has WebGPU, else on the CPU backend
 * with a visible note, and shows the device, the result and the time it took.
 */
import { Cpu } from "@effect-gpu/core"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { M, N, quickstart } from "../../quickstart/program.js"
import { generate, generateFrom } from "./generate.js"

const show = (id: string, text: string) => {
  const el = document.getElementById(id)!
  el.textContent = text
  el.hidden = false
  return el
}

const hasWebGpu = "gpu" in navigator
const devices = hasWebGpu ? WebGpu.layerOrCpu() : Cpu.layer()
const started = performance.now()

/** then the tokens of a small model, streamed onto the page */
const tokens = () => {
  const shown = show("tokens", "")
  const t0 = performance.now()
  return Effect.runPromise(
    generate((token, text) => (shown.textContent += `${token} ${JSON.stringify(text)}\n`)).pipe(Effect.provide(devices))
  ).then(
    (out) => {
      shown.dataset.tokens = JSON.stringify(out.tokens)
      show(
        "speed",
        `${out.tokens.length} tokens on ${out.device} in ${(performance.now() - t0).toFixed(0)} ms, loading included`
      )
    },
    (error: unknown) => show("speed", `generation failed: ${String(error)}`)
  )
}

/** a GGUF file the user picked: loaded with its progress shown, then its tokens streamed onto the page */
const ownModel = () => {
  const input = document.getElementById("model") as HTMLInputElement
  const button = document.getElementById("run") as HTMLButtonElement
  input.addEventListener("change", () => (button.disabled = input.files?.length !== 1))
  button.addEventListener("click", () => {
    const file = input.files?.[0]
    if (file === undefined) return
    button.disabled = true
    const own = show("own", "")
    const loading = show("loading", `loading ${file.name}`)
    delete own.dataset.tokens
    const t0 = performance.now()
    const text = (document.getElementById("prompt") as HTMLInputElement).value
    Effect.runPromise(
      generateFrom(file, text, {
        maxTokens: 32,
        onProgress: (
          loaded,
          total
        ) => (loading.textContent = `loading ${file.name}: ${(100 * loaded / total).toFixed(0)}% of ${
          (total / 2 ** 20).toFixed(1)
        } MiB`),
        onToken: (_, piece) => (own.textContent += piece)
      }).pipe(Effect.either, Effect.provide(devices))
    ).then((out) => {
      if (out._tag === "Left") {
        // a typed failure's message names the file and the problem (a file that is not GGUF, a cut one)
        loading.textContent = `failed: ${out.left.message}`
        own.dataset.tokens = "failed"
        return
      }
      own.dataset.tokens = JSON.stringify(out.right.tokens)
      loading.textContent = `${out.right.file}: ${out.right.tokens.length} tokens on ${out.right.device} in ${
        (performance.now() - t0).toFixed(0)
      } ms, loading included`
    }).finally(() => (button.disabled = false))
  })
}

ownModel()
Effect.runPromise(quickstart.pipe(Effect.provide(devices))).then(
  (outcome) => {
    const ms = performance.now() - started
    show("device", `${outcome.device} (${outcome.type}): ${outcome.description}`)
    if (outcome.type !== "GPU") {
      show(
        "note",
        hasWebGpu
          ? "This browser has navigator.gpu but gave no adapter: the CPU backend ran instead."
          : "This browser has no WebGPU (navigator.gpu is undefined): the CPU backend ran instead."
      )
    }
    const columns = Array.from({ length: N }, (_, j) => outcome.result.slice(j * M, (j + 1) * M))
    const result = show("result", columns.map((c) => `[${c.map((v) => v.toFixed(4)).join(", ")}]`).join("\n"))
    result.dataset.values = JSON.stringify(outcome.result)
    show("time", `${ms.toFixed(1)} ms, device setup included`)
    return tokens().then(() => (document.body.dataset.state = "done"))
  },
  (error: unknown) => {
    show("device", `failed: ${String(error)}`)
    document.body.dataset.state = "failed"
  }
)
