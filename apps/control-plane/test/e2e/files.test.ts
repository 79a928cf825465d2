import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { FILES_MAX_READS_PER_DEPLOYMENT } from "@cm/protocol";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Agent } from "../../../agent/src/agent";
import { ensureScriptImage } from "../../../agent/test/support/script-image";
import { type System, startSystem, until } from "./support/system";

// A deployment's files read out as a tar archive (GET /deployments/{id}/files),
// end to end: the real control plane, a real agent and Docker's archive API,
// on containers that run, were stopped, or ended by themselves; and the
// refusals a tenant meets, each in the one error shape.

const execFileP = promisify(execFile);

needs("docker", "busybox").describe("a deployment's files, running or not", () => {
  let s: System;
  let agent: Agent;
  let tenant: { token: string; user: { id: string } };
  let here = "";

  const api = (method: string, p: string, token = tenant.token) => s.h.call(method, p, { token });
  const files = (id: string, p: string, init: { token?: string; signal?: AbortSignal } = {}) =>
    fetch(`${s.h.url}/deployments/${id}/files?path=${encodeURIComponent(p)}`, {
      headers: { authorization: `Bearer ${init.token ?? tenant.token}` },
      ...(init.signal ? { signal: init.signal } : {}),
    });
  /** One member of an archive the route answered, read by the system's tar. */
  const member = async (res: Response, name: string) => {
    const file = path.join(here, `${Math.random().toString(36).slice(2)}.tar`);
    fs.writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    return (await execFileP("tar", ["-xOf", file, name], { encoding: "utf8" })).stdout;
  };
  /** A read to its end (a read left open holds the deployment's one slot): its status. */
  const read = async (res: Promise<Response>) => {
    const r = await res;
    await r.arrayBuffer();
    return r.status;
  };
  const status = async (id: string) => (await api("GET", `/deployments/${id}`)).json.deployment.status as string;

  async function deploy(script: string, until_: string) {
    const r = await s.h.call("POST", "/deployments", {
      token: tenant.token,
      body: { nodeId: s.nodeId, customImage: ensureScriptImage(), env: { SCRIPT: script } },
    });
    expect(r.status, r.text).toBe(201);
    const id = r.json.deployment.id as string;
    await until(until_, async () => (await status(id)) === until_, 60_000, s.explain(id, tenant.token));
    return id;
  }

  beforeAll(async () => {
    ensureScriptImage();
    here = fs.mkdtempSync(path.join(os.tmpdir(), "cm-files-"));
    s = await startSystem(sqlite);
    agent = s.agent();
    await agent.start();
    tenant = await s.h.signIn();
    await s.h.grantCredits(tenant.user.id, 1_000);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    if (here) fs.rmSync(here, { recursive: true, force: true });
  }, 60_000);

  it("reads a file out of a running container, then out of it once stopped; a missing path is PATH_NOT_FOUND", async () => {
    const id = await deploy("mkdir -p /workspace && echo result-42 > /workspace/out.txt && sleep 3600", "running");
    await until("the file written", async () => (await read(files(id, "/workspace/out.txt"))) === 200);
    const running = await files(id, "/workspace/out.txt");
    expect(running.headers.get("content-type")).toBe("application/x-tar");
    expect(running.headers.get("content-disposition")).toBe('attachment; filename="out.txt.tar"');
    expect(await member(running, "out.txt")).toBe("result-42\n");

    expect((await api("POST", `/deployments/${id}/stop`)).status).toBe(200);
    await until("stopped", async () => (await status(id)) === "stopped");
    // The directory's contents ("/." as docker cp names them), from the stopped container.
    expect(await member(await files(id, "/workspace/."), "./out.txt")).toBe("result-42\n");

    const missing = await files(id, "/workspace/nothing");
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toMatchObject({ code: "PATH_NOT_FOUND", message: "no such file or directory in the container: /workspace/nothing" });
    // Through a file: the engine's own words name the host's directories, which are not passed on.
    const through = await files(id, "/workspace/out.txt/x");
    expect(through.status).toBe(404);
    expect(JSON.stringify(await through.json())).not.toContain("/var/lib/docker");

    const relative = await files(id, "workspace");
    expect(relative.status).toBe(400);
    expect((await relative.json()).error.code).toBe("VALIDATION_ERROR");
    // Another account's deployment is not there at all.
    const other = await s.h.signIn();
    expect((await files(id, "/workspace", { token: other.token })).status).toBe(404);

    // Deleted: its container is removed, and the route knows it no more.
    expect((await api("DELETE", `/deployments/${id}`)).status).toBe(200);
    const gone = await files(id, "/workspace/out.txt");
    expect(gone.status).toBe(404);
    expect((await gone.json()).error.code).toBe("DEPLOYMENT_NOT_FOUND");
  }, 120_000);

  it("reads out of a container that exited by itself, and says CONTAINER_GONE once the container was removed on the node", async () => {
    const id = await deploy("echo done > /result.txt", "exited");
    expect(await member(await files(id, "/result.txt"), "result.txt")).toBe("done\n");

    await runProgram("docker", [
      "rm",
      "-f",
      ...(await runProgram("docker", ["ps", "-aq", "--filter", `label=cm.deployment-id=${id}`])).split("\n").filter(Boolean),
    ]);
    const gone = await files(id, "/result.txt");
    expect(gone.status).toBe(409);
    expect((await gone.json()).error).toMatchObject({ code: "CONTAINER_GONE", details: { currentStatus: await status(id) } });
  }, 120_000);

  it("holds one read of a deployment at a time (the engine holds the container while it reads); a client that goes away ends the node's read", async () => {
    expect(FILES_MAX_READS_PER_DEPLOYMENT).toBe(1);
    // Larger than every buffer on the way, so that a read nobody takes stays open on the node.
    const id = await deploy("head -c 200000000 /dev/zero > /big && touch /ready && sleep 3600", "running");
    await until("the file written", async () => (await read(files(id, "/ready"))) === 200, 60_000);
    const reading = new AbortController();
    const open = await files(id, "/big", { signal: reading.signal });
    expect(open.status).toBe(200);
    const refused = await files(id, "/big");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("5");
    expect((await refused.json()).error.code).toBe("RATE_LIMITED");

    const onNode = () => (agent as unknown as { archives: { open: Set<unknown> } }).archives.open.size;
    expect(onNode()).toBe(1);
    reading.abort();
    await until("the node's read ended", async () => onNode() === 0 && s.h.deps.archives.readsOf(id) === 0, 10_000);
    // The engine let go of the container: the next read opens at once, and the archive of 200 MB arrives entire.
    const whole = await files(id, "/big");
    expect(whole.status).toBe(200);
    let bytes = 0;
    for await (const chunk of whole.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.byteLength;
    expect(bytes).toBeGreaterThan(200_000_000);
  }, 120_000);

  it("says NODE_OFFLINE while the node's agent is away", async () => {
    const id = await deploy("echo kept > /kept.txt && sleep 3600", "running");
    await s.stopAgents();
    await until("node offline", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "offline", 30_000);
    const away = await files(id, "/kept.txt");
    expect(away.status).toBe(409);
    expect((await away.json()).error.code).toBe("NODE_OFFLINE");
  }, 120_000);
});
