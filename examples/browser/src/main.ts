/**
 * The page: runs the quickstart on navigator.gpu where the browser has WebGPU, else on the CPU backend
 * with a visible note, and shows the device, the result and the time it took.
 */
import { Cpu } from "@effect-gpu/core"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { M, N, quickstart } from "../../quickstart/program.js"
import { generate } from "./generate.js"

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
