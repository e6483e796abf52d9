/**
 * ggml's reference cases from disk, for the tests of every package: `ggml` (the core ops) or `ggml-next`
 * (quantized types, attention, mixture of experts).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as GgmlReference from "../src/GgmlReference.js"

const repoRoot = path.resolve(__dirname, "../../..")

/**
 * The directory of a set: EFFECT_GPU_GGML_REFERENCE/<set> if set, else the shared copy beside the
 * checkout (what CI lays out), else the copy in this repository.
 */
export const referenceDir = (set: "ggml" | "ggml-next" = "ggml"): string => {
  const candidates = [
    process.env.EFFECT_GPU_GGML_REFERENCE === undefined
      ? undefined
      : path.join(process.env.EFFECT_GPU_GGML_REFERENCE, set),
    path.join(repoRoot, "../shared/reference", set),
    path.join(repoRoot, "reference", set)
  ].filter((p): p is string => p !== undefined && p !== "")
  const found = candidates.find((p) => fs.existsSync(path.join(p, "cases.json")))
  if (found === undefined) throw new Error(`no ggml reference cases in ${candidates.join(", ")}`)
  return found
}

export const loadReference = (set: "ggml" | "ggml-next" = "ggml"): GgmlReference.Suite => {
  const dir = referenceDir(set)
  return GgmlReference.parse(
    fs.readFileSync(path.join(dir, "cases.json"), "utf8"),
    new Uint8Array(fs.readFileSync(path.join(dir, "data.bin")))
  )
}
