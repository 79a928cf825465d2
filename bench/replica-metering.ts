/**
 * Question (issue 41): with three control-plane replicas on one PostgreSQL
 * database, is every running deployment charged exactly floor(rate x seconds /
 * 3600) of the time its agent proved, never twice, over minutes, with one
 * replica killed outright (SIGKILL) half-way? Protocol-level agents (real `ws`
 * clients) spread over the three, two deployments per node at odd rates; the
 * killed replica's agents reconnect to the others. The same run as
 * apps/control-plane/test/replicas/metering.test.ts, longer and bigger.
 *
 *   npx tsx bench/replica-metering.ts            (2 minutes, the kill at 1; NODES_PER_REPLICA=4)
 *   npx tsx bench/replica-metering.ts --quick    (20 s, the kill at 10 s; 2 nodes per replica)
 *
 * Goal: every deployment exact, none charged past its proof, the books hold.
 */
import { runMeteredFleet } from "../apps/control-plane/test/replicas/support/metered-fleet";
import { quick, reportFigures } from "./lib/figures";

const runMs = Number(process.env.RUN_MS ?? (quick ? 20_000 : 120_000));
const nodesPerReplica = Number(process.env.NODES_PER_REPLICA ?? (quick ? 2 : 4));
const r = await runMeteredFleet({
  replicas: 3,
  nodesPerReplica,
  deploymentsPerNode: 2,
  runMs,
  killAtMs: runMs / 2,
  log: (line) => console.log(`  ${line}`),
});

const s = (ms: number) => (ms / 1000).toFixed(3);
console.log("  deployment                 rate  moved  billed s  proven s (max)  short of proof  charges  charged micro  floor(rate x s / 3600)");
for (const d of r.deployments)
  console.log(
    `  ${d.id.padEnd(26)} ${String(d.rate).padStart(5)}  ${(d.moved ? "yes" : "no").padEnd(5)}  ${s(d.billedMs).padStart(8)}  ${s(d.provenMaxMs).padStart(14)}  ${s(d.provenMaxMs - d.billedMs).padStart(14)}  ${String(d.charges).padStart(7)}  ${String(d.totalCostMicro).padStart(13)}  ${d.exactMicro}`,
  );
const exact = r.deployments.filter((d) => d.totalCostMicro === d.exactMicro && d.ledgerMicro === d.totalCostMicro && d.describedMs === d.billedMs);
const over = r.deployments.filter((d) => d.billedMs > d.provenMaxMs);
const short = r.deployments.filter((d) => d.billedMs < d.provenMinMs);
const shortOf = (moved: boolean) => r.deployments.filter((d) => d.moved === moved).map((d) => d.provenMaxMs - d.billedMs);
const range = (xs: number[]) => (xs.length ? `${s(Math.min(...xs))}-${s(Math.max(...xs))} s` : "none");
console.log(
  `replica-metering: ${r.deployments.length} deployments, ${runMs / 1000} s, replica ${r.killed.replica} killed half-way (its ${r.killed.agents} agents back in ${Math.max(...r.killed.reconnectMs)} ms at most), ${r.seconds.toFixed(0)} s in all`,
);
console.log(`  exact (charge = floor, = its ledger rows, rows' seconds = billed): ${exact.length} of ${r.deployments.length}`);
console.log(`  charged past the agent's proof (twice, somewhere): ${over.length}; short beyond a dead replica's last seconds: ${short.length}`);
console.log(
  `  proven but not charged: agents that stayed ${range(shortOf(false))}; agents that moved ${range(shortOf(true))} (the dead replica's last tick to its last heartbeat)`,
);
console.log(`  books: ${r.broken.length === 0 ? "hold" : `BROKEN: ${r.broken.join("; ")}`}`);
reportFigures("replica-metering", [
  {
    name: "deployments not charged exactly, or past their proof",
    value: r.deployments.length - exact.length + over.length + short.length,
    goal: 0,
    better: "lower",
  },
]);
process.exit(exact.length === r.deployments.length && over.length + short.length + r.broken.length === 0 ? 0 : 1);
