import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

// A tenant refused for credits is told how many the deployment needs, how many they
// have, and where more come from, at create and at start (issue 30).

describeEachDatabase("INSUFFICIENT_CREDITS on $name", (db) => {
  let h: Harness;
  let node: string;
  beforeAll(async () => {
    h = await startHarness(db);
    node = (await h.onlineNode((await h.signIn()).token, { hourlyRateCents: 60, maxDeployments: 10 })).id;
  });
  afterAll(() => h.close());

  it("names the hour's hold needed, what is available and how to add credits, at create", async () => {
    const poor = await h.signIn();
    await h.grantCredits(poor.user.id, 59.5);
    const r = await h.call("POST", "/deployments", { token: poor.token, body: { nodeId: node, customImage: "busybox", gpuCount: 0 } });
    expect(r.status).toBe(402);
    expect(r.json.error).toMatchObject({ code: "INSUFFICIENT_CREDITS", details: { requiredCredits: 60, availableCredits: 59.5 } });
    expect(r.json.error.message).toBe(
      "this deployment holds one hour of its rate, 60 credits, while it runs, and 59.5 credits are available: add credits with `cm credits buy PACKAGE_ID` (`cm credits packages` lists them) or POST /credits/deposit/initiate",
    );
    // Nothing was held for it.
    expect((await h.call("GET", "/credits/balance", { token: poor.token })).json.balance).toMatchObject({ available: 59.5, reserved: 0 });
  });

  it("counts what other deployments hold as not available, at start", async () => {
    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100);
    const create = () => h.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node, customImage: "busybox" } });
    const first = (await create()).json.deployment;
    expect((await h.call("POST", `/deployments/${first.id}/stop`, { token: tenant.token })).status).toBe(200);
    expect((await create()).status).toBe(201); // holds 60 of the 100
    const r = await h.call("POST", `/deployments/${first.id}/start`, { token: tenant.token });
    expect(r.status).toBe(402);
    expect(r.json.error).toMatchObject({ code: "INSUFFICIENT_CREDITS", details: { requiredCredits: 60, availableCredits: 40 } });
    expect(r.json.error.message).toContain("60 credits, while it runs, and 40 credits are available: add credits with `cm credits buy PACKAGE_ID`");
  });
});
