import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness, TestClock } from "../../control-plane/test/support/harness";
import { terminal } from "./support/cli";

// cm deploy without --node is placed by the control plane, and --estimate prints what it
// would do (issue 30): the real `cm` as a subprocess against a real control plane (SQLite,
// port 0) whose clock stands at the real time, as cli.test.ts.

let h: Harness;
let t: ReturnType<typeof terminal>;
let cheap: string;
let dear: string;
const H100 = { name: "NVIDIA H100 80GB HBM3", vramMb: 81_559 };
beforeAll(async () => {
  h = await startHarness(sqliteDatabase, { overrides: { clock: new TestClock(Date.now()) } });
  t = terminal({ CM_API_URL: h.url });
  const op = await h.signIn();
  dear = (await h.onlineNode(op.token, { gpus: [H100, H100], hourlyRateCents: 300, maxDeployments: 8 })).id;
  cheap = (await h.onlineNode(op.token, { gpus: [H100, H100], hourlyRateCents: 100, maxDeployments: 8 })).id;
  await h.onlineNode(op.token, { gpus: [H100, H100], hourlyRateCents: 50, region: "us-east" });
  t.keypair();
  expect((await t.cm(["login"])).code).toBe(0);
  await h.grantCredits(JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.id, 10_000);
});
afterAll(async () => {
  t?.close();
  await h?.close();
});

it("--estimate prints the node, rate, hold and what it would hold, and creates nothing", async () => {
  const r = await t.cm(["deploy", "--image", "busybox:1.36", "--gpus", "2", "--region", "eu-west", "--estimate"]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^fits: +yes$/m);
  expect(r.stdout).toMatch(new RegExp(`^node: +${cheap}$`, "m"));
  expect(r.stdout).toMatch(/^rate: +200¢\/h$/m);
  expect(r.stdout).toMatch(/^hold: +200 credits while it is live/m);
  expect(r.stdout).toMatch(/^holds: +2 GPUs, 32 cores, 115200 MB memory$/m);
  const json = JSON.parse((await t.cm(["deploy", "--image", "busybox:1.36", "--gpus", "2", "--node", dear, "--estimate", "--json"])).stdout);
  expect(json).toMatchObject({ fits: true, nodeId: dear, hourlyRateCents: 600, holdCredits: 600 });
  expect(JSON.parse((await t.cm(["ls", "--json"])).stdout).deployments).toEqual([]);
});

it("deploys without --node on the cheapest node that fits, and says why none fits", async () => {
  const r = await t.cm(["deploy", "--image", "busybox:1.36", "--gpus", "2", "--region", "eu-west", "--gpu-model", "H100", "--min-vram", "80000"]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stderr).toContain(`on ${cheap} (pending), 200¢/h`);
  const none = await t.cm(["deploy", "--image", "busybox:1.36", "--gpus", "2", "--region", "eu-west", "--max-rate", "250"]);
  expect(none.code).toBe(1);
  expect(none.stderr).toMatch(/^error NO_NODE_FITS: no node fits: 3 nodes online: 1 lacks 2 free GPUs, 1 is over your maximum rate, 1 is in another region$/m);
  const estimate = await t.cm(["deploy", "--image", "busybox:1.36", "--gpus", "2", "--region", "eu-west", "--max-rate", "250", "--estimate"]);
  expect(estimate.stdout).toMatch(/^fits: +no: NO_NODE_FITS: no node fits: 3 nodes online/m);
  // A script's test: 0 when it fits (above), 1 when it does not, with or without --json.
  expect(estimate.code).toBe(1);
  const json = await t.cm(["deploy", "--image", "busybox:1.36", "--gpus", "2", "--region", "eu-west", "--max-rate", "250", "--estimate", "--json"]);
  expect(json.code).toBe(1);
  expect(JSON.parse(json.stdout)).toMatchObject({ fits: false, refusal: { code: "NO_NODE_FITS" } });
  expect((await t.cm(["deploy", "--image", "x", "--region", "mars"])).stderr).toMatch(/--region is one of us-east, /);
});
