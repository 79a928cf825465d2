/**
 * Question: how much of the control plane's memory does one tenant's big log
 * take while it is read, and does /health stay answered meanwhile? A deployment
 * holds LINES lines of 16 KiB (the longest line the store keeps; 5,400 is 88 MB).
 * Phases, each against the same control plane: idle; STREAMS log streams
 * (?tail=10000) whose clients read nothing, held HOLD_MS; one stream read to
 * its end; one GET /deployments/:id/logs?tail=10000; three at once (in that
 * order: what a big read leaves uncollected would hide what a stream takes). Figures: the control plane's VmRSS from /proc (its peak in the
 * phase, sampled every 10 ms, less its RSS when the phase began), and GET
 * /health from a process of its own every 20 ms. Baselines, same run: the idle
 * process (RSS, /health), and with BEFORE=<commit> the same phases against the
 * control plane as it was at that commit (extracted with git archive, sharing
 * this checkout's node_modules).
 *
 * The control plane runs in its own process (SQLite file database); this
 * process is the node's agent on a real agent WebSocket (the tests' SimAgent)
 * that ships the lines, and the readers.
 *
 *   npx tsx bench/log-reads.ts        (LINES=5400 STREAMS=10 HOLD_MS=10000 BEFORE=<commit>)
 */
import { type ChildProcess, execSync, fork } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Deployment } from "@cm/protocol";
import { SimAgent } from "../apps/control-plane/test/agents/support/sim-agent";
import type { Plane } from "./lib/system-procs";

const LINES = Number(process.env.LINES ?? 5_400);
const STREAMS = Number(process.env.STREAMS ?? 10);
const HOLD_MS = Number(process.env.HOLD_MS ?? 10_000);
const LINE_BYTES = 16 * 1024;
const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..");

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
const quantile = (xs: number[], q: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]! : Number.NaN);
const message = <T>(p: ChildProcess, accept: (m: unknown) => boolean = () => true) =>
  new Promise<T>((resolve, reject) => {
    const exit = (code: number | null) => reject(new Error(`child exited ${code}`));
    const on = (m: unknown) => {
      if (!accept(m)) return;
      p.off("message", on);
      p.off("exit", exit);
      resolve(m as T);
    };
    p.on("message", on);
    p.once("exit", exit);
  });

/** The tree at `commit`, runnable from here: its files, and this checkout's node_modules with @cm/* pointing into it. */
function treeAt(commit: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), "cm-before-"));
  execSync(`git archive ${commit} | tar -x -C ${dir}`, { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
  const modules = path.join(repoRoot, "node_modules");
  mkdirSync(path.join(dir, "node_modules", "@cm"), { recursive: true });
  for (const entry of readdirSync(modules)) if (entry !== "@cm") symlinkSync(path.join(modules, entry), path.join(dir, "node_modules", entry));
  for (const entry of readdirSync(path.join(modules, "@cm")))
    symlinkSync(readlinkSync(path.join(modules, "@cm", entry)), path.join(dir, "node_modules", "@cm", entry));
  return dir;
}

type Figures = { phase: string; deltaMb: number; peakMb: number; healthP50: number; healthMax: number; ms: number; note: string };

async function measure(root: string, label: string): Promise<Figures[]> {
  const plane = fork(path.join(root, "bench/lib/endpoint-plane.ts"), [], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const info = await message<Plane>(plane);
  const pid = plane.pid!;
  const auth = { authorization: `Bearer ${info.tenantToken}` };
  const api = async <T>(method: string, p: string, body?: unknown): Promise<T> =>
    (await (
      await fetch(info.url + p, { method, headers: { ...auth, "content-type": "application/json" }, body: body ? JSON.stringify(body) : undefined })
    ).json()) as T;
  const { agent } = await SimAgent.connect(info.url, info.agentToken);
  const beats = setInterval(() => agent.heartbeat(), 3_000);
  const probe = fork(path.join(here, "lib/health-probe.ts"), [], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const out: Figures[] = [];
  try {
    const { deployment } = await api<{ deployment: Deployment }>("POST", "/deployments", { nodeId: info.nodeId, customImage: "busybox:1.36" });
    const id = deployment.id;
    const { deployment: spec } = await agent.command(id, "create");
    for (const s of ["pulling", "starting", "running"]) agent.report(spec, s);

    // The log, shipped as an agent would, 400 lines a frame, paced below the node's default rate
    // (LOG_INGEST_BYTES_PER_S, 8 MiB/s) so that no batch is refused.
    const t0 = performance.now();
    for (let from = 1; from <= LINES; from += 400) {
      const ts = new Date().toISOString();
      const lines = Array.from({ length: Math.min(400, LINES - from + 1) }, (_, i) => ({
        seq: from + i,
        ts,
        stream: "stdout" as const,
        message: String(from + i).padEnd(LINE_BYTES, "x"),
      }));
      agent.send({ type: "logs", deploymentId: id, lines });
      await agent.next("logs_ack", (a) => a.deploymentId === id && a.cursor.seq === lines.at(-1)!.seq, 60_000);
      const dueMs = (((from + lines.length - 1) * LINE_BYTES) / (6 * 1024 * 1024)) * 1000;
      await sleep(dueMs - (performance.now() - t0));
    }
    console.log(`[${label}] ${LINES} lines of 16 KiB stored in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await sleep(2_000);
    probe.send({ url: info.url });
    await message(probe, (m) => m === "ready");

    /** Runs `work` while sampling RSS and /health; the phase's figures. */
    const phase = async (name: string, work: () => Promise<string>) => {
      probe.send("collect");
      await message(probe, (m) => typeof m === "object");
      if (global.gc) global.gc();
      const start = rssMb(pid);
      let peak = start;
      const sampler = setInterval(() => {
        peak = Math.max(peak, rssMb(pid));
      }, 10);
      const t = performance.now();
      const note = await work();
      const ms = performance.now() - t;
      clearInterval(sampler);
      peak = Math.max(peak, rssMb(pid));
      probe.send("collect");
      const { latenciesMs } = await message<{ latenciesMs: number[] }>(probe, (m) => typeof m === "object");
      const f = { phase: name, deltaMb: peak - start, peakMb: peak, healthP50: quantile(latenciesMs, 0.5), healthMax: Math.max(...latenciesMs), ms, note };
      console.log(
        `[${label}] ${name}: ${ms.toFixed(0)} ms; RSS ${start.toFixed(0)} -> peak ${peak.toFixed(0)} MB (+${f.deltaMb.toFixed(0)}); /health p50 ${f.healthP50.toFixed(1)} ms, max ${f.healthMax.toFixed(1)} ms (${latenciesMs.length} asks); ${note}`,
      );
      out.push(f);
      await sleep(1_000);
    };
    const read = async () => {
      const r = await fetch(`${info.url}/deployments/${id}/logs?tail=10000`, { headers: auth });
      const body = await r.arrayBuffer();
      return body.byteLength;
    };

    await phase("idle", async () => {
      await sleep(3_000);
      return "nothing asked";
    });
    await phase(`${STREAMS} unread streams`, async () => {
      const sockets: net.Socket[] = [];
      for (let i = 0; i < STREAMS; i++) {
        const s = net.connect(Number(new URL(info.url).port), "127.0.0.1");
        s.on("error", () => undefined);
        s.pause();
        s.write(
          `GET /deployments/${id}/logs/stream?tail=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${info.tenantToken}\r\nAccept: text/event-stream\r\n\r\n`,
        );
        sockets.push(s);
      }
      await sleep(HOLD_MS);
      const held = rssMb(pid);
      for (const s of sockets) s.destroy();
      return `RSS ${held.toFixed(0)} MB after ${HOLD_MS / 1000} s`;
    });
    await phase("one stream read to the end", async () => {
      const ac = new AbortController();
      const r = await fetch(`${info.url}/deployments/${id}/logs/stream?tail=10000`, { headers: { ...auth, accept: "text/event-stream" }, signal: ac.signal });
      const reader = r.body!.getReader();
      const decoder = new TextDecoder();
      let events = 0;
      let bytes = 0;
      let tail = "";
      while (events < LINES) {
        const { value, done } = await reader.read();
        if (done) break;
        bytes += value.byteLength;
        tail = (tail + decoder.decode(value, { stream: true })).slice(-200_000);
        events += (decoder.decode(value).match(/\nid: /g) ?? []).length;
      }
      ac.abort();
      return `${events} lines, ${(bytes / 1e6).toFixed(1)} MB`;
    });
    await phase("one read", async () => `answer ${((await read()) / 1e6).toFixed(1)} MB`);
    await phase("three reads at once", async () => `answers ${((await Promise.all([read(), read(), read()])).reduce((a, b) => a + b) / 1e6).toFixed(1)} MB`);
    await api("DELETE", `/deployments/${id}`);
  } finally {
    clearInterval(beats);
    probe.kill();
    await agent.close();
    plane.kill("SIGTERM");
    await new Promise((resolve) => plane.once("exit", resolve));
    rmSync(`/tmp/cm-bench-plane-${pid}.db`, { force: true });
    rmSync(`/tmp/cm-bench-plane-${pid}.db-wal`, { force: true });
    rmSync(`/tmp/cm-bench-plane-${pid}.db-shm`, { force: true });
  }
  return out;
}

const after = await measure(repoRoot, "now");
const beforeRoot = process.env.BEFORE ? treeAt(process.env.BEFORE) : undefined;
const before = beforeRoot ? await measure(beforeRoot, `at ${process.env.BEFORE}`) : undefined;
if (beforeRoot) rmSync(beforeRoot, { recursive: true, force: true });

const cell = (f: Figures, idle: Figures) =>
  `+${f.deltaMb.toFixed(0)} MB (peak ${f.peakMb.toFixed(0)}, ${(f.peakMb / idle.peakMb).toFixed(2)}x idle) | ${f.healthMax.toFixed(0)} ms (p50 ${f.healthP50.toFixed(1)}) | ${(f.ms / 1000).toFixed(2)} s`;
const perStream = (fs: Figures[]) => (fs.find((f) => f.phase.endsWith("unread streams"))!.deltaMb / STREAMS).toFixed(1);
console.log(`\nper unread stream: +${perStream(after)} MB now${before ? `, +${perStream(before)} MB at ${process.env.BEFORE}` : ""}`);
console.log(`| phase | RSS over the phase's start | /health max | took |${before ? ` at ${process.env.BEFORE}: RSS | /health max | took | RSS ratio |` : ""}`);
console.log(`|---|---|---|---|${before ? "---|---|---|---|" : ""}`);
for (const [i, f] of after.entries()) {
  const b = before?.[i];
  console.log(`| ${f.phase} | ${cell(f, after[0]!)} |${b ? ` ${cell(b, before![0]!)} | ${b.deltaMb > 0 ? (f.deltaMb / b.deltaMb).toFixed(3) : "-"} |` : ""}`);
}
process.exit(0);
