// Child process for bench/endpoints.ts and bench/deploy.ts: the control plane
// alone, with a node enrolled and a tenant holding credits; tells the parent
// how to reach them over IPC.

import { systemClock } from "../../apps/control-plane/src/services/ids";
import { startHarness } from "../../apps/control-plane/test/support/harness";

const h = await startHarness(
  { name: "sqlite", create: async () => ({ url: `file:/tmp/cm-bench-plane-${process.pid}.db`, drop: async () => undefined }) },
  { config: { ACCESS_TOKEN_TTL_S: 3600 }, overrides: { clock: systemClock } },
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
