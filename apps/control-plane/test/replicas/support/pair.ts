import { createPgDatabase, type TestDatabase } from "@cm/db/testing";
import type { Config } from "../../../src/config";
import { type AgentHarness, startAgentHarness } from "../../agents/support/agent-harness";
import { freePort } from "../../faults/support/pg-cluster";

export type ReplicaPair = { a: AgentHarness; b: AgentHarness; close(): Promise<void> };

/**
 * Two control planes in this process on one fresh PostgreSQL database, as two
 * replicas behind a load balancer would be: tests talk to each directly.
 * `hops`: each gets REPLICA_ADDRESS (its own port) and a shared REPLICA_SECRET.
 */
export async function startReplicaPair(o: { a?: Partial<Config>; b?: Partial<Config>; hops?: boolean } = {}): Promise<ReplicaPair> {
  const made = await createPgDatabase();
  const shared: TestDatabase = { name: "postgres", create: async () => ({ url: made.url, drop: async () => undefined }) };
  const start = async (config: Partial<Config> = {}) => {
    if (!o.hops) return startAgentHarness(shared, config);
    const port = await freePort();
    return startAgentHarness(
      shared,
      { REPLICA_ADDRESS: `http://127.0.0.1:${port}`, REPLICA_SECRET: "a-replica-secret-that-is-long-enough-1234", ...config },
      {},
      port,
    );
  };
  const a = await start(o.a);
  const b = await start(o.b);
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await made.drop();
    },
  };
}
