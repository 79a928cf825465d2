// Child process of bench/log-stream.ts: `count` clients following one
// deployment's logs stream (Server-Sent Events over fetch, as the SDK reads it),
// in a process of their own so their parsing does not share the event loop of
// the process writing the lines. Each line's message carries the wall-clock
// millisecond it was written; each follower notes how long after that it read it.
//
//   parent -> { url, token, deploymentId, count }
//   child  -> { ready: count } once every stream has handed its cursor
//   parent -> "collect"; child -> { delays: number[], linesPerFollower: number[] }
import { readSse } from "../../packages/sdk/src/sse";

type Start = { url: string; token: string; deploymentId: string; count: number };

const start = await new Promise<Start>((resolve) => process.once("message", (m) => resolve(m as Start)));
const delays: number[] = [];
const lines = new Array<number>(start.count).fill(0);
const abort = new AbortController();
let ready = 0;

async function follow(i: number) {
  const res = await fetch(`${start.url}/deployments/${start.deploymentId}/logs/stream?tail=1`, {
    headers: { authorization: `Bearer ${start.token}`, accept: "text/event-stream" },
    signal: abort.signal,
  });
  if (res.status !== 200) throw new Error(`follower ${i}: ${res.status} ${await res.text()}`);
  let first = true;
  try {
    for await (const e of readSse(res.body!)) {
      const now = Date.now();
      if (first) {
        first = false;
        if (++ready === start.count) process.send!({ ready });
      }
      if (e.event !== "message") continue;
      const [, sentMs] = (JSON.parse(e.data) as { message: string }).message.split(" ");
      delays.push(now - Number(sentMs));
      lines[i]!++;
    }
  } catch {
    // aborted at collect
  }
}

// Opened 50 at a time, each batch once its cursors came: a thousand connects at
// once would measure the accept queue, not following.
for (let i = 0; i < start.count; i += 50) {
  const batch = Math.min(50, start.count - i);
  for (let k = 0; k < batch; k++) void follow(i + k).catch((err) => console.error(`follower ${i + k}:`, err));
  while (ready < i + batch) await new Promise((r) => setTimeout(r, 5));
}

process.on("message", (m) => {
  if (m !== "collect") return;
  process.send!({ delays, linesPerFollower: lines }, () => {
    abort.abort();
    process.exit(0);
  });
});
