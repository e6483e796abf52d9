/**
 * A bounded load on loopback: C clients, each sending one-row /infer requests back to back for a fixed
 * time, then latency percentiles and throughput. Start the server first (`pnpm serve`), then:
 *
 *   tsx examples/http-inference/load.ts [clients=1,50,200] [seconds=10] [port=8080]
 */
import * as http from "node:http"

const clients = (process.argv[2] ?? "1,50,200").split(",").map(Number)
const seconds = Number(process.argv[3] ?? 10)
const port = Number(process.argv[4] ?? process.env.PORT ?? 8080)
const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(...clients) })
const row = JSON.stringify({ inputs: [Array.from({ length: 16 }, (_, i) => Math.sin(i))] })

const request = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        path: "/infer",
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(row) }
      },
      (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      }
    )
    req.on("error", reject)
    req.end(row)
  })

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]

const level = async (n: number) => {
  const latencies: Array<number> = []
  let failed = 0
  const end = performance.now() + seconds * 1000
  const client = async () => {
    while (performance.now() < end) {
      const t0 = performance.now()
      const status = await request().catch(() => 0)
      if (status === 200) latencies.push(performance.now() - t0)
      else failed++
    }
  }
  const t0 = performance.now()
  await Promise.all(Array.from({ length: n }, client))
  const elapsed = (performance.now() - t0) / 1000
  const sorted = [...latencies].sort((a, b) => a - b)
  console.log(
    `${String(n).padStart(4)} clients: ${(latencies.length / elapsed).toFixed(0).padStart(6)} req/s, ` +
      `p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms, ` +
      `${latencies.length} ok, ${failed} failed`
  )
}

for (const n of clients) await level(n)
agent.destroy()
