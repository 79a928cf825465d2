/**
 * Question: what does reading into one reused buffer, instead of the fresh
 * buffer Node allocates for every read, save a process that relays a large
 * download? (The agent reads a container's side of a tunnel that way.)
 * A source in this process sends MIB MiB per connection; a relay process
 * carries it to a client in this process, piped (the baseline) or read into a
 * reused buffer; the two alternate for ROUNDS rounds, medians compared.
 *
 * With TLS=1 the relay's client connection is TLS, so the relay writes what it
 * reads into TLS (the agent's tunnels to an HTTPS control plane).
 *
 *   npx tsx bench/read-buffer.ts          (MIB=512 ROUNDS=5 TLS=0)
 */
import { execFileSync, fork } from "node:child_process";
import { mkdtempSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import tls from "node:tls";
import { fileURLToPath } from "node:url";
import { cpuMicros } from "./lib/cpu";
import { median } from "./lib/median";

const mib = Number(process.env.MIB ?? 512);
const rounds = Number(process.env.ROUNDS ?? 5);
const useTls = process.env.TLS === "1";

const chunk = Buffer.alloc(64 * 1024, 7);
const source = net.createServer((s) => {
  let left = mib * 16;
  const pump = () => {
    while (left > 0) {
      left--;
      if (!s.write(chunk)) return void s.once("drain", pump);
    }
    s.end();
  };
  pump();
  s.on("error", () => s.destroy());
});
await new Promise<void>((r) => source.listen(0, "127.0.0.1", r));
const sourcePort = (source.address() as net.AddressInfo).port;

let tlsArgs: string[] = [];
if (useTls) {
  const dir = mkdtempSync(path.join(tmpdir(), "cm-read-buffer-"));
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=relay", "-keyout", `${dir}/key.pem`, "-out", `${dir}/cert.pem`],
    { stdio: "ignore" },
  );
  tlsArgs = [`${dir}/key.pem`, `${dir}/cert.pem`];
}

const modes = ["pipe", "reused"] as const;
const relays = await Promise.all(
  modes.map(async (mode) => {
    const proc = fork(fileURLToPath(new URL("./lib/read-relay.ts", import.meta.url)), [mode, String(sourcePort), ...tlsArgs], {
      execArgv: ["--import", "tsx"],
    });
    const port = await new Promise<number>((r) => proc.once("message", (m) => r(m as number)));
    return { mode, proc, port };
  }),
);

/** One download through a relay: MB/s, and the relay's CPU per MB (from /proc). */
async function download(r: (typeof relays)[number]) {
  const cpu0 = cpuMicros(r.proc.pid!);
  const t0 = process.hrtime.bigint();
  let bytes = 0;
  await new Promise<void>((resolve, reject) => {
    // The benchmark's own client: the relay's certificate is taken as it comes.
    const c = useTls ? tls.connect({ port: r.port, host: "127.0.0.1", rejectUnauthorized: false }) : net.connect(r.port, "127.0.0.1");
    c.on("data", (d: Buffer) => (bytes += d.length));
    c.on("end", resolve);
    c.on("error", reject);
  });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (bytes !== mib * 1024 * 1024) throw new Error(`${r.mode}: got ${bytes} bytes`);
  const mb = bytes / 1e6;
  return { mbps: mb / s, usPerMb: (cpuMicros(r.proc.pid!) - cpu0) / mb };
}

try {
  for (const r of relays) await download(r); // warm-up, unmeasured
  const seen: Record<string, Array<{ mbps: number; usPerMb: number }>> = { pipe: [], reused: [] };
  for (let i = 1; i <= rounds; i++) {
    const line: string[] = [];
    for (const r of relays) {
      const d = await download(r);
      seen[r.mode]!.push(d);
      line.push(`${r.mode} ${d.mbps.toFixed(0)} MB/s, ${d.usPerMb.toFixed(0)} us CPU/MB`);
    }
    console.log(`round ${i}: ${line.join("; ")}`);
  }
  const m = (mode: string, k: "mbps" | "usPerMb") => median(seen[mode]!.map((x) => x[k]));
  console.log(`${mib} MiB through one relay process${useTls ? " writing into TLS" : ""}, medians of ${rounds}:`);
  console.log(`  piped (baseline): ${m("pipe", "mbps").toFixed(0)} MB/s, relay ${m("pipe", "usPerMb").toFixed(0)} us CPU per MB`);
  console.log(`  reused buffer:    ${m("reused", "mbps").toFixed(0)} MB/s, relay ${m("reused", "usPerMb").toFixed(0)} us CPU per MB`);
  console.log(
    `  ratio reused/piped: throughput ${(m("reused", "mbps") / m("pipe", "mbps")).toFixed(2)}, CPU per MB ${(m("reused", "usPerMb") / m("pipe", "usPerMb")).toFixed(2)}`,
  );
} finally {
  for (const r of relays) r.proc.kill();
  source.close();
}
