/**
 * Question: what does one account holding many log streams cost the control
 * plane, what do the caps leave of it, and does the memory come back when the
 * streams close? One token opens STREAMS log streams spread over DEPLOYMENTS
 * deployments (no lines stored: what a stream costs by being open) and holds
 * them HOLD_MS; then closes them all; three times. Figures: the control plane's VmRSS from
 * /proc after the opens settled, less its RSS before; its heap after a full
 * garbage collection, before the opens, while held and after the closes
 * of each round (whether closed streams leave anything behind, which would grow
 * from one round to the next: RSS seldom goes back to the system); how many streams it took and refused (429 RATE_LIMITED). Baseline, same
 * run: the same control plane with no caps (MAX_STREAMS_PER_* raised out of
 * reach), what every account could do before the caps.
 *
 * The control plane runs in its own process (SQLite file database), once per
 * phase; this process is the node's agent on a real agent WebSocket (the
 * tests' SimAgent) and the readers.
 *
 *   npx tsx bench/open-streams.ts        (STREAMS=2000 DEPLOYMENTS=50 HOLD_MS=3000)
 */
import { type ChildProcess, fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Deployment } from "@cm/protocol";
import { SimAgent } from "../apps/control-plane/test/agents/support/sim-agent";
import type { Plane } from "./lib/system-procs";

const STREAMS = Number(process.env.STREAMS ?? 2_000);
const DEPLOYMENTS = Number(process.env.DEPLOYMENTS ?? 50);
const HOLD_MS = Number(process.env.HOLD_MS ?? 3_000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
const message = <T>(p: ChildProcess) => new Promise<T>((resolve) => p.once("message", (m) => resolve(m as T)));

type Figures = { phase: string; taken: number; refused: number; heldMb: number; perStreamKb: number; heapHeldMb: number; heapLeftMb: number[] };

async function phase(label: string, caps: { perAccount: number; perDeployment: number }): Promise<Figures> {
  const plane = fork(fileURLToPath(new URL("./lib/endpoint-plane.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx", "--expose-gc"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, MAX_STREAMS_PER_ACCOUNT: String(caps.perAccount), MAX_STREAMS_PER_DEPLOYMENT: String(caps.perDeployment) },
  });
  const info = await message<Plane>(plane);
  const pid = plane.pid!;
  const heapMb = async () => {
    plane.send({ type: "heap" });
    return (await message<{ heapUsedMb: number }>(plane)).heapUsedMb;
  };
  const auth = { authorization: `Bearer ${info.tenantToken}` };
  const { agent } = await SimAgent.connect(info.url, info.agentToken);
  const beats = setInterval(() => agent.heartbeat(), 3_000);
  const ids: string[] = [];
  for (let i = 0; i < DEPLOYMENTS; i++) {
    const r = await fetch(`${info.url}/deployments`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ nodeId: info.nodeId, customImage: "busybox:1.36" }),
    });
    ids.push(((await r.json()) as { deployment: Deployment }).deployment.id);
  }
  await sleep(1_000);
  const heapBefore = await heapMb();
  const before = rssMb(pid);

  let taken = 0;
  let refused = 0;
  let held = 0;
  let heapHeld = 0;
  const heapLeft: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // The responses are kept: undici closes the connection of an unread one that is garbage collected.
    const open: Array<{ abort: AbortController; res: Response }> = [];
    taken = 0;
    refused = 0;
    for (let i = 0; i < STREAMS; i += 100) {
      await Promise.all(
        Array.from({ length: Math.min(100, STREAMS - i) }, async (_, j) => {
          const abort = new AbortController();
          const res = await fetch(`${info.url}/deployments/${ids[(i + j) % ids.length]}/logs/stream`, {
            headers: { ...auth, accept: "text/event-stream" },
            signal: abort.signal,
          });
          if (res.status === 200) {
            taken++;
            open.push({ abort, res });
          } else {
            refused++;
            await res.body?.cancel();
          }
        }),
      );
    }
    await sleep(HOLD_MS);
    if (round === 0) {
      held = rssMb(pid) - before;
      heapHeld = (await heapMb()) - heapBefore;
    }
    for (const o of open) o.abort.abort();
    await sleep(HOLD_MS);
    heapLeft.push((await heapMb()) - heapBefore);
  }

  clearInterval(beats);
  agent.close();
  plane.kill("SIGTERM");
  await new Promise((resolve) => plane.once("exit", resolve));
  return { phase: label, taken, refused, heldMb: held, perStreamKb: taken ? (held * 1024) / taken : 0, heapHeldMb: heapHeld, heapLeftMb: heapLeft };
}

const rows = [
  await phase("no caps (before)", { perAccount: 1_000_000, perDeployment: 1_000_000 }),
  await phase("default caps (100 per account, 20 per deployment)", { perAccount: 100, perDeployment: 20 }),
];
console.log(`${STREAMS} log streams from one token over ${DEPLOYMENTS} deployments, held ${HOLD_MS} ms, then closed`);
console.log("| phase | taken | refused (429) | RSS while held | RSS per stream taken | heap while held | heap after the closes, round by round |");
console.log("|---|---|---|---|---|---|---|");
const mb = (x: number) => `${x >= 0 ? "+" : ""}${x.toFixed(1)} MB`;
for (const r of rows)
  console.log(
    `| ${r.phase} | ${r.taken} | ${r.refused} | ${mb(r.heldMb)} | ${r.perStreamKb.toFixed(0)} KB | ${mb(r.heapHeldMb)} | ${r.heapLeftMb.map(mb).join(", ")} |`,
  );
process.exit(0);
