// Child process of bench/log-reads.ts: asks GET /health back to back (20 ms
// apart) in a process of its own, so what it measures is the control plane's
// event loop, not the benchmark's own work on the answers it reads.
//
//   parent -> { url }; then "collect" -> { latenciesMs: number[] } since the last collect
import { setTimeout as sleep } from "node:timers/promises";

const { url } = await new Promise<{ url: string }>((resolve) => process.once("message", (m) => resolve(m as { url: string })));
let latencies: number[] = [];
process.on("message", (m) => {
  if (m !== "collect") return;
  process.send!({ latenciesMs: latencies });
  latencies = [];
});
process.send!("ready");
for (;;) {
  const t0 = performance.now();
  // A connection the server reset under load counts as an answer that long in coming; the next ask opens another.
  await fetch(`${url}/health`)
    .then((r) => r.arrayBuffer())
    .catch(() => undefined);
  latencies.push(performance.now() - t0);
  await sleep(20);
}
