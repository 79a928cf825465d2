import { AGENT_EXEC_PATH } from "@cm/protocol";
import { sqliteDatabase } from "@cm/testkit";
import nacl from "tweetnacl";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { systemClock } from "../../../apps/control-plane/src/services/ids";
import { startAgentHarness } from "../../../apps/control-plane/test/agents/support/agent-harness";
import { type Harness, startHarness, TestClock } from "../../../apps/control-plane/test/support/harness";
import { ApiError, createClient, MemorySessionStore } from "../src";

// The SDK against a real control plane that ends streams and exec sessions with
// the sign-in that opened them: follow stops with the API's UNAUTHORIZED once
// signed out, reads on across an access token's expiry with a fresh one, and an
// exec session outlives its first token because the SDK renews it.

const naclSigner = () => {
  const kp = nacl.sign.keyPair();
  return { publicKey: kp.publicKey, signMessage: async (m: Uint8Array) => nacl.sign.detached(m, kp.secretKey) };
};

describe("follow and the sign-in behind it", () => {
  let h: Harness;
  let clock: TestClock;
  let nodeId: string;
  beforeAll(async () => {
    clock = new TestClock(Date.now());
    h = await startHarness(sqliteDatabase, { overrides: { clock }, config: { ACCESS_TOKEN_TTL_S: 600, REVOCATION_CHECK_MS: 50 } });
    nodeId = (await h.onlineNode((await h.signIn()).token, { maxDeployments: 10 })).id;
  });
  afterAll(() => h.close());

  async function signedIn() {
    const store = new MemorySessionStore();
    const client = createClient({ baseUrl: h.url, store, now: clock.now });
    const { user } = await client.auth.signIn(naclSigner());
    await h.grantCredits(user.id, 1_000);
    const { deployment } = await client.deployments.create({ nodeId, customImage: "busybox:1.36" });
    let seq = 0;
    const add = (...messages: string[]) => {
      const ts = new Date(clock.now()).toISOString();
      return h.deps.repos.logIngest.append(
        deployment.id,
        messages.map((message) => ({ seq: ++seq, ts, tsMs: Date.parse(ts), stream: "stdout" as const, message })),
      );
    };
    return { client, store, id: deployment.id, add };
  }

  it("throws the API's UNAUTHORIZED once the session is signed out elsewhere, instead of reconnecting", async () => {
    const { client, store, id, add } = await signedIn();
    await add("1");
    const seen: string[] = [];
    const outcome = (async () => {
      for await (const line of client.deployments.follow(id, { intervalMs: 50 })) seen.push(line.message);
    })().catch((e: unknown) => e);
    await expect.poll(() => seen).toEqual(["1"]);
    // Another program holding the same session signs it out.
    await h.call("POST", "/auth/logout", { body: { refreshToken: (await store.load())!.refreshToken } });
    const err = await outcome;
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: "UNAUTHORIZED", status: 401 });
  });

  it("reads on across the access token's expiry with a refreshed token: no line lost or repeated", async () => {
    const { client, store, id, add } = await signedIn();
    await add("1", "2");
    const seen: string[] = [];
    const following = (async () => {
      for await (const line of client.deployments.follow(id, { intervalMs: 50 })) seen.push(line.message);
    })();
    await expect.poll(() => seen.length).toBe(2);
    const first = (await store.load())!.accessToken;
    clock.advance(601_000);
    await add("3");
    await expect.poll(() => seen.length).toBe(3);
    expect((await store.load())!.accessToken).not.toBe(first);
    await add("4");
    await client.deployments.stop(id);
    await following;
    expect(seen).toEqual(["1", "2", "3", "4"]);
  });
});

describe("exec and the sign-in behind it", () => {
  it("keeps a session open past its first access token's expiry by renewing it on the connection", async () => {
    // Tokens of 3 s on the real clock: the SDK renews half-way, the control plane ends a session whose token expired.
    const h = await startAgentHarness(sqliteDatabase, { ACCESS_TOKEN_TTL_S: 3, REVOCATION_CHECK_MS: 50 }, { clock: systemClock });
    try {
      const op = await h.signIn();
      const node = await h.connectedNode(op.token);
      const client = createClient({ baseUrl: h.url });
      const { user } = await client.auth.signIn(naclSigner());
      await h.grantCredits(user.id, 100_000);
      const token = (await client.auth.session())!.accessToken;
      const dep = await h.deploy(token, node.id, node.agent);
      await h.run(node.agent, dep.spec, token);
      const firstExpiresAt = (await client.auth.session())!.expiresAt;

      const session = client.deployments.exec(dep.id, { command: ["cat"], WebSocket });
      const ask = await node.agent.next("open_exec");
      const agent = new WebSocket(`${h.url.replace(/^http/, "ws")}${AGENT_EXEC_PATH}?id=${ask.execId}`, {
        headers: { authorization: `Bearer ${node.agentToken}` },
      });
      const atAgent: string[] = [];
      agent.on("message", (m, isBinary) => isBinary && atAgent.push((m as Buffer).subarray(1).toString()));
      await new Promise((r) => agent.once("open", r));
      await session.opened;

      // Well past the first token's expiry (and the one after it).
      await new Promise((r) => setTimeout(r, firstExpiresAt - Date.now() + 2_500));
      session.write("still here\n");
      await expect.poll(() => atAgent.join("")).toBe("still here\n");
      agent.send(JSON.stringify({ type: "exit", code: 0 }));
      agent.close(1000);
      expect(await session.exit).toBe(0);
    } finally {
      await h.close();
    }
  });
});
