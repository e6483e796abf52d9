import * as path from "node:path"
import type { ViteUserConfig } from "vitest/config"

const config: ViteUserConfig = {
  esbuild: { target: "es2022" },
  test: {
    setupFiles: [path.join(__dirname, "vitest.setup.ts")],
    fakeTimers: { toFake: undefined },
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
}

export default config
