import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    projects: ["packages/*", "examples/http-inference", "examples/llm-server", "examples/generate", "examples/installed", "examples/browser", "examples/tracing"]
  }
})
