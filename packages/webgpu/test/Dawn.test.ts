import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as DawnBrowser from "../src/internal/dawn.browser.js"

describe("where WebGPU comes from", () => {
  // bundlers resolve "#dawn" with the browser condition: Dawn's Node-only code never enters a bundle
  it("browsers resolve #dawn to a module that loads no Dawn", () => {
    const pkg = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"))
    assert.deepStrictEqual(pkg.imports["#dawn"], {
      browser: "./src/internal/dawn.browser.ts",
      default: "./src/internal/dawn.ts"
    })
    const source = fs.readFileSync(new URL("../src/internal/dawn.browser.ts", import.meta.url), "utf8")
    assert.notInclude(source, "import(")
  })

  it("a browser without navigator.gpu is told how to get WebGPU", async () => {
    const error = await DawnBrowser.load([]).then(() => undefined, (e: unknown) => e)
    assert.instanceOf(error, Error)
    assert.include((error as Error).message, "navigator.gpu is undefined")
    assert.include((error as Error).message, "CPU backend")
  })
})
