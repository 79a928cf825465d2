import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureScriptImage } from "../../agent/test/support/script-image";
import { type System, startSystem, until } from "../../control-plane/test/e2e/support/system";
import { terminal } from "./support/cli";

// `cm cp ID:PATH LOCAL` out of a deployment that is not running, as a tenant
// runs it after a job: the container a stopped or exited deployment keeps is
// read through the files route (Docker's archive API on the node), not through
// an exec the stopped container cannot run; and what it says when the path or
// the deployment is gone, or when a copy goes the other way.

needs("docker", "busybox").describe("cm cp out of a deployment that is not running", () => {
  let s: System;
  let t: ReturnType<typeof terminal>;
  let here = "";

  const deploy = async (script: string) => {
    const r = await t.cm(["deploy", "--node", s.nodeId, "--image", ensureScriptImage(), "--env", `SCRIPT=${script}`]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  const status = async (id: string) => (await s.h.deps.repos.deployments.get(id))?.status;

  beforeAll(async () => {
    ensureScriptImage();
    s = await startSystem(sqlite);
    await s.agent().start();
    t = terminal({ CM_API_URL: s.h.url });
    t.keypair();
    expect((await t.cm(["login"])).code).toBe(0);
    await s.h.grantCredits(JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.id, 1_000);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    here = fs.mkdtempSync(path.join(os.tmpdir(), "cm-cp-kept-"));
  }, 180_000);
  afterAll(async () => {
    t?.close();
    await s?.close();
    if (here) fs.rmSync(here, { recursive: true, force: true });
  }, 60_000);

  it("reads a stopped deployment's results out; a missing path says so; into it is refused until it is started; after delete it is gone", async () => {
    const id = await deploy("mkdir -p /workspace/results && echo epoch-3 > /workspace/results/metrics.txt && sleep 3600");
    await until("running", async () => (await status(id)) === "running", 60_000);
    await until("the results written", async () => (await t.cm(["exec", id, "--", "test", "-f", "/workspace/results/metrics.txt"])).code === 0);
    expect((await t.cm(["stop", id])).code).toBe(0);
    await until("stopped", async () => (await status(id)) === "stopped");

    const out = await t.cm(["cp", `${id}:/workspace/results`, here]);
    expect(out, out.stderr).toMatchObject({ code: 0, stderr: `copied 1 file, 8 bytes from ${id}:/workspace/results to ${path.join(here, "results")}\n` });
    expect(fs.readFileSync(path.join(here, "results/metrics.txt"), "utf8")).toBe("epoch-3\n");

    expect(await t.cm(["cp", `${id}:/workspace/nothing`, path.join(here, "x")])).toMatchObject({
      code: 1,
      stderr: "error NO_SUCH_PATH: no such file or directory in the container: /workspace/nothing\n",
    });
    const into = await t.cm(["cp", path.join(here, "results/metrics.txt"), `${id}:/workspace`]);
    expect(into.code).toBe(1);
    expect(into.stderr).toContain(
      `error DEPLOYMENT_NOT_RUNNING: deployment ${id} is stopped: cm cp copies into a running deployment only; start it first (cm start ${id})`,
    );

    expect((await t.cm(["rm", id])).code).toBe(0);
    const gone = await t.cm(["cp", `${id}:/workspace/results`, path.join(here, "after")]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/^error DEPLOYMENT_NOT_FOUND: /);
    expect(fs.existsSync(path.join(here, "after"))).toBe(false);
  }, 180_000);

  it("reads the file a deployment that exited by itself left, to stdout as a tar stream too", async () => {
    const id = await deploy("echo finished > /result.txt");
    await until("exited", async () => (await status(id)) === "exited", 60_000);
    const file = path.join(here, "result.txt");
    const r = await t.cm(["cp", `${id}:/result.txt`, file]);
    expect(r, r.stderr).toMatchObject({ code: 0, stderr: `copied 1 file, 9 bytes from ${id}:/result.txt to ${file}\n` });
    expect(fs.readFileSync(file, "utf8")).toBe("finished\n");
    const tar = await t.cm(["cp", `${id}:/result.txt`, "-"]);
    expect(tar.code, tar.stderr).toBe(0);
    expect(tar.stdout).toContain("finished\n");
  }, 120_000);
});
