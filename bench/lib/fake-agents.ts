// Child process of bench/fan-in.ts: `count` simulated agents on real `ws`
// connections, each saying hello, reporting its inventory and then
// heartbeating every `intervalMs`, phased so the whole fleet's heartbeats are
// spread evenly over the interval. Prints its counters as one JSON line a second
// (`connected`: synced and still open). With `retry` set, an agent whose
// connection closes tries again after a full-jitter delay of up to 5 s, as the
// real agent does (bench/replica-scale.ts); without, it stays away (fan-in).
//
//   node --import tsx bench/lib/fake-agents.ts <baseUrl> <firstIndex> <count> <fleetSize> <connectsPerS> <intervalMs> [retry]
import WebSocket from "ws";

const [baseUrl, firstArg, countArg, fleetArg, rateArg, intervalArg, retryArg] = process.argv.slice(2);
const retry = retryArg === "retry";
const first = Number(firstArg);
const count = Number(countArg);
const fleet = Number(fleetArg);
const connectsPerS = Number(rateArg);
const intervalMs = Number(intervalArg);
const wsUrl = baseUrl!.replace(/^http/, "ws") + "/agent/ws";

const specs = JSON.stringify({
  type: "specs",
  specs: {
    cpuModel: "AMD EPYC 7763",
    cpuCores: 32,
    cpuThreads: 64,
    ramMb: 128_000,
    diskGb: 2000,
    diskType: "NVMe",
    networkSpeedMbps: 10_000,
    os: "Ubuntu 22.04",
    containerVersion: "27.0.3",
  },
  gpus: [
    {
      name: "NVIDIA GeForce RTX 4090",
      vramMb: 24564,
      computeVersion: "8.9",
      brand: "NVIDIA",
      computeCores: 16384,
      tensorCores: 512,
      driverVersion: "550.54.15",
      index: 0,
      uuid: "GPU-0",
    },
  ],
});
const stats = { connected: 0, closed: 0, retries: 0, beats: 0, errors: 0, closeCodes: {} as Record<string, number> };

function agent(i: number) {
  const ws = new WebSocket(wsUrl, { perMessageDeflate: false });
  let timer: NodeJS.Timeout | undefined;
  let synced = false;
  ws.on("open", () => ws.send(JSON.stringify({ type: "hello", token: `bench-agent-${i}`, agentVersion: "fan-in", protocolVersions: [1] })));
  ws.on("message", (data) => {
    const type = (JSON.parse(data.toString()) as { type: string }).type;
    if (type === "error") stats.errors++;
    if (type !== "sync") return;
    synced = true;
    stats.connected++;
    ws.send(specs);
    const beat = () => {
      ws.send(JSON.stringify({ type: "heartbeat", sentAt: Date.now(), running: [] }));
      stats.beats++;
    };
    // Agent i beats at i/fleet of the way through each interval.
    timer = setTimeout(
      () => {
        beat();
        timer = setInterval(beat, intervalMs);
      },
      Math.round((i / fleet) * intervalMs),
    );
  });
  ws.on("close", (code) => {
    clearTimeout(timer);
    clearInterval(timer);
    stats.closed++;
    stats.closeCodes[code] = (stats.closeCodes[code] ?? 0) + 1;
    if (synced) stats.connected--;
    if (retry) {
      stats.retries++;
      setTimeout(() => agent(i), Math.random() * 5000);
    }
  });
  ws.on("error", () => stats.errors++);
}

// Connect in slices every 50 ms, at connectsPerS in all.
let next = first;
const slice = Math.max(1, Math.round(connectsPerS / 20));
const ramp = setInterval(() => {
  for (let k = 0; k < slice && next < first + count; k++) agent(next++);
  if (next >= first + count) clearInterval(ramp);
}, 50);

setInterval(() => process.stdout.write(JSON.stringify(stats) + "\n"), 1000);
process.on("SIGTERM", () => process.exit(0));
