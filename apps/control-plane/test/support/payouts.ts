import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Keypair } from "@solana/web3.js";
import type { AgentHarness } from "../agents/support/agent-harness";

/** 6,000 cents an hour: 100 credits a metered minute, 90 of them the operator's at the default fee. */
export const PAYOUT_TEST_RATE = 6_000;

/** A keypair file as the Solana CLI writes it (a JSON array of 64 numbers), readable by its owner only unless told. */
export function payoutKeyFile(key: Keypair, mode = 0o600): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "cm-payout-")), "hot.json");
  writeFileSync(file, JSON.stringify(Array.from(key.secretKey)));
  chmodSync(file, mode);
  return file;
}

/**
 * A signed-in operator whose node earned `minutes` metered minutes at PAYOUT_TEST_RATE, through the real meter, on one
 * deployment (`deploymentId`); `earnMore(minutes)` earns more on another deployment of the same node and answers its id.
 */
export async function operatorWithEarnings(h: AgentHarness, minutes: number) {
  const op = await h.signIn();
  const t = await h.signIn();
  await h.grantCredits(t.user.id, 100_000);
  const node = await h.connectedNode(op.token, { hourlyRateCents: PAYOUT_TEST_RATE });
  async function earnMore(minutes: number) {
    const d = await h.deploy(t.token, node.id, node.agent);
    await h.run(node.agent, d.spec, t.token);
    await h.meterMinutes(node.agent, node.id, minutes);
    await h.call("POST", `/deployments/${d.id}/stop`, { token: t.token });
    // Stopped on the node too: its GPU is free for the next.
    node.agent.report(d.spec, "stopped");
    return d.id;
  }
  return { ...op, deploymentId: await earnMore(minutes), earnMore };
}
