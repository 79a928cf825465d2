import http from "node:http";
import { needs, sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { BUSYBOX_IMAGE, ensureBusyboxImage } from "../../agent/test/support/busybox-image";
import { type System, startSystem, until } from "../../control-plane/test/e2e/support/system";
import { terminal } from "./support/cli";

// `cm deploy --wait` waits for what the container serves, not only for `running` (issue
// 30): a real control plane and gateway, a real agent on Docker, the real cm. The
// endpoint URLs are the gateway's (http://KEY-PORT.localhost:PORT), reached as a browser
// reaches them.

needs("docker", "busybox").describe("cm deploy --wait and the endpoints", () => {
  let s: System;
  let t: ReturnType<typeof terminal>;

  beforeAll(async () => {
    ensureBusyboxImage();
    s = await startSystem(sqliteDatabase);
    await s.agent().start();
    t = terminal({ CM_API_URL: s.h.url });
    t.keypair();
    expect((await t.cm(["login"])).code).toBe(0);
    await s.h.grantCredits(JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.id, 10_000);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
  }, 180_000);
  afterAll(async () => {
    t?.close();
    await s?.close();
  }, 60_000);

  it("ends once the endpoint answers, a server that listens only seconds after the container runs", async () => {
    // httpd's 404 for / is an answer: any response the container gives counts.
    const r = await t.cm([
      "deploy",
      "--image",
      BUSYBOX_IMAGE,
      "--port",
      "8080",
      "--node",
      s.nodeId,
      "--wait",
      "--",
      "sh",
      "-c",
      "sleep 4; exec httpd -f -p 8080 -h /tmp",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const id = r.stdout.trim();
    expect(r.stderr).toMatch(/ {2}\d\d:\d\d:\d\d {2}running\n {2}\d\d:\d\d:\d\d {2}waiting for the endpoints to answer\n/);
    const url = /^ {2}(http:\/\/\S+) -> 8080$/m.exec(r.stderr)?.[1];
    expect(url).toMatch(/^http:\/\/\S+\.localhost:\d+$/);
    // Right when cm returns, the container answers through the gateway (no gateway page).
    const res = await get(s.h.url, new URL(url!).host);
    expect(res.headers["x-gateway-error"]).toBeUndefined();
    expect(res.statusCode).toBe(404);
    await t.cm(["rm", id]);
  }, 120_000);

  it("prints an endpoint that answered at once as answering, before the agent's own probe says ready", async () => {
    const r = await t.cm(["deploy", "--image", BUSYBOX_IMAGE, "--port", "8080", "--node", s.nodeId, "--wait", "--", "httpd", "-f", "-p", "8080", "-h", "/tmp"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^ {2}http:\/\/\S+ -> 8080$/m);
    expect(r.stderr).not.toContain("not ready");
    await t.cm(["rm", r.stdout.trim()]);
  }, 120_000);

  it("says it timed out waiting for the endpoints when nothing listens on the port", async () => {
    const r = await t.cm(["deploy", "--image", BUSYBOX_IMAGE, "--port", "8080", "--node", s.nodeId, "--wait", "--timeout", "12", "--", "sleep", "600"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /\nerror WAIT_TIMEOUT: deployment (dep_\S+) is running, but nothing answered at http:\/\/\S+\.localhost:\d+ \(port 8080\) before the timeout: it may still be loading \(cm logs \1 shows what it does\)/,
    );
    const id = /deployment (dep_\S+) is running/.exec(r.stderr)![1]!;
    // It still runs: only the waiting ended.
    expect(JSON.parse((await t.cm(["show", id, "--json"])).stdout).deployment.status).toBe("running");
    await t.cm(["rm", id]);
  }, 120_000);
});

/** A GET to the gateway at `base` for the endpoint named by `host`, as a browser resolving *.localhost sends it. */
function get(base: string, host: string): Promise<http.IncomingMessage> {
  return new Promise((done, fail) => {
    http
      .get(base, { headers: { host } }, (res) => {
        res.resume();
        done(res);
      })
      .on("error", fail);
  });
}
