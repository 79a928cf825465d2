import { needs } from "@cm/testkit";
import { expect, it } from "vitest";
import { eventually } from "../agents/support/agent-harness";
import { SimAgent } from "../agents/support/sim-agent";
import { startReplicaPair } from "./support/pair";

/**
 * A node whose agent session replica A holds, judged by replica B from the
 * heartbeat A stored: in bench/replica-scale.ts's connection surge A's flushes fell
 * behind, B marked 9,500 of 30,000 heartbeating nodes offline, and they stayed so
 * (a heartbeat only moves last_heartbeat; online comes from a hello).
 */
needs("postgres").describe("a node held by another replica", () => {
  const INTERVAL = 10_000;
  /** Both replicas' clocks move; A's agent heartbeats each interval, and A does not flush them (its flush lags). */
  const beatsUnflushed = async (pair: Awaited<ReturnType<typeof startReplicaPair>>, agent: SimAgent, intervals: number) => {
    for (let i = 0; i < intervals; i++) {
      pair.a.clock.advance(INTERVAL);
      pair.b.clock.advance(INTERVAL);
      agent.heartbeat();
      await new Promise((r) => setTimeout(r, 30));
    }
  };

  it("is not judged silent by another replica while its stored heartbeat lags by less than a second window", async () => {
    const pair = await startReplicaPair();
    try {
      const op = await pair.a.signIn();
      const node = await pair.a.connectedNode(op.token);
      await beatsUnflushed(pair, node.agent, 5); // 50 s: past the 30-s window, within two
      await pair.b.deps.agents.tick();
      expect((await pair.b.deps.repos.nodes.get(node.id))!.status).toBe("online");
      // A, which hears it, flushes and judges it online; B then finds nothing stale.
      await pair.a.deps.agents.tick();
      await pair.b.deps.agents.tick();
      expect((await pair.b.deps.repos.nodes.get(node.id))!.status).toBe("online");
    } finally {
      await pair.close();
    }
  }, 60_000);

  it("marked offline elsewhere while it heartbeats here, its session closes and the reconnected agent brings it back online", async () => {
    const pair = await startReplicaPair();
    try {
      const op = await pair.a.signIn();
      const node = await pair.a.connectedNode(op.token);
      await beatsUnflushed(pair, node.agent, 8); // 80 s: past two windows, B judges it
      await pair.b.deps.agents.tick();
      expect((await pair.b.deps.repos.nodes.get(node.id))!.status).toBe("offline");
      // A hears of the change (LISTEN/NOTIFY) and closes the session the agent still heartbeats on.
      const closed = await Promise.race([node.agent.closed, new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000))]);
      expect(closed, "A closed the agent's session").toBeDefined();
      // The agent reconnects (here, to A again): its hello puts the node back online.
      const again = await SimAgent.connect(pair.a.url, node.agentToken, { gpus: 1 });
      try {
        await eventually(async () => expect((await pair.b.deps.repos.nodes.get(node.id))!.status).toBe("online"));
      } finally {
        await again.agent.close();
      }
    } finally {
      await pair.close();
    }
  }, 60_000);
});
