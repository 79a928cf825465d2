import http from "node:http";

export type LoadResult = { requests: number; errors: number; rps: number; p50Ms: number; p99Ms: number };

/**
 * A closed-loop load generator: `concurrency` clients on keep-alive sockets, each
 * sending its next request when the last one answers, for `durationMs`.
 */
export async function load(
  base: string,
  nextPath: (i: number) => string,
  o: { concurrency: number; durationMs: number; headers?: Record<string, string> },
): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.concurrency });
  const url = new URL(base);
  const latencies: number[] = [];
  let errors = 0;
  let i = 0;
  const end = performance.now() + o.durationMs;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = http.request({ host: url.hostname, port: url.port, path: nextPath(i++), agent, headers: o.headers }, (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode !== 200) errors++;
          latencies.push(performance.now() - t0);
          resolve();
        });
      });
      req.on("error", () => {
        errors++;
        resolve();
      });
      req.end();
    });
  const started = performance.now();
  await Promise.all(
    Array.from({ length: o.concurrency }, async () => {
      while (performance.now() < end) await one();
    }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  return { requests: latencies.length, errors, rps: latencies.length / elapsedS, p50Ms: q(0.5), p99Ms: q(0.99) };
}

export const fmt = (r: LoadResult) =>
  `${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  (${r.requests} requests, ${r.errors} errors)`;
