// Child process for bench/endpoints.ts, bench/deploy.ts and the log benches: the control plane
// alone, with a node enrolled and a tenant holding credits; tells the parent
// how to reach them over IPC.

import { systemClock } from "../../apps/control-plane/src/services/ids";
import { startHarness } from "../../apps/control-plane/test/support/harness";

const h = await startHarness(
  { name: "sqlite", create: async () => ({ url: `file:/tmp/cm-bench-plane-${process.pid}.db`, drop: async () => undefined }) },
  {
    config: {
      ACCESS_TOKEN_TTL_S: 3600,
      // One tenant is every reader here (bench/log-stream.ts has 1,000 followers of one deployment): no stream caps
      // unless the bench names them (bench/open-streams.ts measures them).
      MAX_STREAMS_PER_ACCOUNT: Number(process.env.MAX_STREAMS_PER_ACCOUNT ?? 1_000_000),
      MAX_STREAMS_PER_DEPLOYMENT: Number(process.env.MAX_STREAMS_PER_DEPLOYMENT ?? 1_000_000),
    },
    overrides: { clock: systemClock },
  },
);
const op = await h.signIn();
const node = await h.call("POST", "/operator/nodes", {
  token: op.token,
  body: { name: "bench", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 64 },
});
const tenant = await h.signIn();
await h.grantCredits(tenant.user.id, 100_000);
process.send!({ url: h.url, agentToken: node.json.agentToken, nodeId: node.json.node.id, tenantToken: tenant.token });
process.on("SIGTERM", () => void h.close().then(() => process.exit(0)));
// What stays on the heap once the garbage is collected (started with --expose-gc): whether closed streams left anything behind.
process.on("message", (m: { type?: string }) => {
  if (m?.type !== "heap") return;
  (globalThis as { gc?: () => void }).gc?.();
  process.send!({ type: "heap", heapUsedMb: process.memoryUsage().heapUsed / 1024 / 1024 });
});
