// While the control plane cannot write logs (its database is down) it answers
// each logs frame "send it again later"; the agent sends those batches again and
// no later acknowledgement skips them: the stored log has no gap. The outage is
// the log store's writes failing for a while, inside the real control plane.
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureScriptImage } from "../../../agent/test/support/script-image";
import { type System, startSystem, until } from "./support/system";

const COUNTER = 'i=1; while true; do echo "line $i"; i=$((i+1)); usleep 2000; done';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

needs("docker", "busybox").describe("log batches refused during an outage, with the real control plane", () => {
  let s: System;
  let token = "";
  let image = "";

  beforeAll(async () => {
    image = ensureScriptImage();
    s = await startSystem(sqlite);
    await s.agent().start();
    // Online once its agent has reported its specs (its first host probe can take a second).
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    const tenant = await s.h.signIn();
    token = tenant.token;
    await s.h.grantCredits(tenant.user.id, 1_000);
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  it("are sent again: after three short outages no line is missing or stored twice", async () => {
    const r = await s.h.call("POST", "/deployments", { token, body: { nodeId: s.nodeId, customImage: image, env: { SCRIPT: COUNTER } } });
    expect(r.status).toBe(201);
    const id = r.json.deployment.id as string;
    const ingest = s.h.deps.repos.logIngest;
    const append = ingest.append.bind(ingest);
    await until("logging", async () => (await s.h.deps.repos.logs.tail(id, 10_000)).length >= 50, 30_000, s.explain(id, token));

    // Every other write fails for a while, so refused batches sit between taken ones.
    let refusing = false;
    let refused = 0;
    let calls = 0;
    ingest.append = async (deploymentId, lines) => {
      if (refusing && ++calls % 2 === 1) {
        refused += 1;
        throw new Error("database unavailable (test)");
      }
      return append(deploymentId, lines);
    };
    for (let outage = 0; outage < 3; outage++) {
      refusing = true;
      await sleep(700);
      refusing = false;
      await sleep(500);
    }
    expect(refused).toBeGreaterThan(3);

    const [container] = (await runProgram("docker", ["ps", "-q", "--filter", `label=cm.deployment-id=${id}`])).split("\n");
    const target = (await runProgram("docker", ["logs", container!])).split("\n").filter(Boolean).length;
    await until(
      "the lines written so far stored",
      async () => (await s.h.deps.repos.logs.tail(id, 10_000)).length >= target,
      20_000,
      s.explain(id, token),
    ).catch(() => undefined);
    // One ascending read from the first line: tail() measures then reads the newest
    // n, so lines the container writes meanwhile push its oldest out of the answer.
    const rows = await s.h.deps.repos.logs.after(id, 0, 100_000);
    const numbers = rows.map((row) => Number(row.message.replace("line ", "")));
    const missing = Array.from({ length: Math.max(...numbers) }, (_, i) => i + 1).filter((n) => !numbers.includes(n));
    console.log(
      `real control plane, ${refused} log writes refused in 3 outages: ${rows.length} lines stored, ${missing.length} missing, ${rows.length - new Set(numbers).size} twice`,
    );
    expect(missing).toEqual([]);
    expect(new Set(numbers).size).toBe(rows.length);
    expect(rows.length).toBeGreaterThanOrEqual(target);
  }, 90_000);
});
