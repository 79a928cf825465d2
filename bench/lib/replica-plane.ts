// Child process for bench/replica-hop.ts: one control-plane replica on a
// PostgreSQL database shared with the others (REPLICA_DB_URL), listening on
// REPLICA_PORT and reachable by the others there. The first (REPLICA_SEED=1)
// also enrolls a node and a tenant with credits, and tells the parent over IPC.
import { systemClock } from "../../apps/control-plane/src/services/ids";
import { startHarness } from "../../apps/control-plane/test/support/harness";

const port = Number(process.env.REPLICA_PORT);
const url = process.env.REPLICA_DB_URL!;
const h = await startHarness(
  { name: "postgres", create: async () => ({ url, drop: async () => undefined }) },
  {
    config: {
      ACCESS_TOKEN_TTL_S: 3600,
      REPLICA_ADDRESS: `http://127.0.0.1:${port}`,
      REPLICA_SECRET: process.env.REPLICA_SECRET!,
      MAX_STREAMS_PER_ACCOUNT: 1_000_000,
      MAX_STREAMS_PER_DEPLOYMENT: 1_000_000,
    },
    overrides: { clock: systemClock },
    port,
  },
);
if (process.env.REPLICA_SEED === "1") {
  const op = await h.signIn();
  const node = await h.call("POST", "/operator/nodes", {
    token: op.token,
    body: { name: "bench", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 64 },
  });
  const tenant = await h.signIn();
  await h.grantCredits(tenant.user.id, 100_000);
  process.send!({ url: h.url, agentToken: node.json.agentToken, nodeId: node.json.node.id, tenantToken: tenant.token });
} else process.send!({ url: h.url });
process.on("SIGTERM", () => void h.close().then(() => process.exit(0)));
