import { execFile, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqliteDatabase } from "@cm/testkit";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../../scripts/build";
import { type Harness, startHarness, TestClock } from "../../control-plane/test/support/harness";
import { type CliResult, ENTRY, ROOT, TSX, terminal } from "./support/cli";

// The real `cm` as a subprocess against a real control plane (SQLite, port 0). Its clock
// stands still at the real time: tokens are valid by the CLI's clock, and nodes with no
// agent stay online.

let h: Harness;
let t: ReturnType<typeof terminal>;
let api: Record<string, string>;
beforeAll(async () => {
  h = await startHarness(sqliteDatabase, { overrides: { clock: new TestClock(Date.now()) } });
  t = terminal();
  api = { CM_API_URL: h.url };
});
afterAll(async () => {
  t?.close();
  await h?.close();
});

describe("usage", () => {
  it("prints the version, and help with an example on every command", async () => {
    expect(await t.cm(["--version"])).toMatchObject({ code: 0, stdout: "0.1.0\n" });
    const help = await t.cm(["deploy", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: cm deploy (--template ID_OR_SLUG | --image IMAGE) [--node ID | [--region R]");
    expect(help.stdout).toMatch(/Examples?:\n {2}\$ cm deploy/);
  });

  it.each([
    [["frobnicate"], /error: unknown command frobnicate\n\n.*Usage: cm /s],
    [["nodes", "--fast"], /error: Unknown option '--fast'.*\n\nBrowse the nodes for rent\.\n\nUsage: cm nodes/s],
    [["show"], /error: missing ID\n\n.*Usage: cm show ID/s],
    [["logs", "dep_1", "--since", "yesterday"], /error: --since takes an ISO 8601 time/],
    [["deploy", "--node", "node_1"], /error: give one of --template and --image/],
    [["deploy", "--image", "x", "--node", "node_1", "--restart", "always"], /error: --restart is no, on-failure or on-failure:N/],
    [["deploy", "--image", "x", "--node", "node_1", "--restart", "on-failure:11"], /error: --restart on-failure:N takes N from 1 to 10, not 11/],
    [
      ["operator"],
      /error: unknown command operator \(did you mean cm operator add, cm operator nodes, cm operator earnings, cm operator payout, cm operator payouts, cm operator retire, cm operator set, cm operator maintenance, cm operator deployments\?\)/,
    ],
  ])("exits 2 with the usage for %j", async (args, message) => {
    const r = await t.cm(args, api);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(message);
  });
});

describe("bad inputs", () => {
  it("says the keypair is missing, with no stack trace", async () => {
    const r = await t.cm(["login"], api);
    expect(r).toMatchObject({ code: 1, stdout: "" });
    expect(r.stderr).toMatch(
      /^error KEYPAIR_NOT_FOUND: cannot read the keypair .*\.config\/solana\/id\.json \(no such file\): create one there with `cm keygen`, or pass --keypair PATH/,
    );
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("says a malformed keypair is not one", async () => {
    for (const content of ["not json", "[1,2,3]", JSON.stringify(Array(64).fill(300))]) {
      const path = join(t.home, "bad.json");
      writeFileSync(path, content);
      const r = await t.cm(["login", "--keypair", path], api);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `error KEYPAIR_INVALID: ${path} is not a Solana keypair: expected a JSON array of 64 numbers from 0 to 255, as \`solana-keygen new\` writes\n`,
      );
    }
  });

  it("says the API is unreachable", async () => {
    const closed = await closedPort();
    const r = await t.cm(["nodes", "--api", `http://127.0.0.1:${closed}`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `error NETWORK_ERROR: cannot reach http://127.0.0.1:${closed}/nodes: ECONNREFUSED (is the control plane running? --api or CM_API_URL says where)\n`,
    );
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("says to log in when there is no session", async () => {
    const r = await t.cm(["whoami"], api);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("error NOT_SIGNED_IN: not signed in: sign in first with `cm login`\n");
  });

  it("says the session expired when it cannot be refreshed, and forgets it", async () => {
    const other = terminal({ CM_API_URL: h.url });
    const dir = join(other.home, ".config/cm/sessions");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${h.url.replace("http://", "").replace(/[^A-Za-z0-9.-]+/g, "_")}.json`);
    writeFileSync(file, JSON.stringify({ accessToken: "cma_old", refreshToken: "cmr_revoked", expiresAt: 0 }));
    const r = await other.cm(["credits"]);
    other.close();
    expect(r).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "error SESSION_EXPIRED: the session expired and cannot be refreshed: sign in again with `cm login`\n",
    });
  });
});

/** A port nothing listens on: one the system just gave and took back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}

describe("a tenant's session", () => {
  it("logs in with the keypair, keeps the session 0600, and knows who it is", async () => {
    const kp = t.keypair();
    const login = await t.cm(["login"], api);
    expect(login.code).toBe(0);
    expect(login.stderr).toContain(`Signed in to ${h.url} as ${bs58.encode(kp.publicKey)}`);
    const file = join(t.home, ".config/cm/sessions", `${h.url.replace("http://", "").replace(/[^A-Za-z0-9.-]+/g, "_")}.json`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(file, "..")).mode & 0o777).toBe(0o700);

    const who = await t.cm(["whoami", "--json"], api);
    expect(who.code).toBe(0);
    const me = JSON.parse(who.stdout);
    expect(me.user.walletAddress).toBe(bs58.encode(kp.publicKey));
    const human = await t.cm(["whoami"], api);
    expect(human.stdout).toMatch(new RegExp(`^wallet: +${me.user.walletAddress}\nuser: +${me.user.id}\noperator: +no\n`));
  });
});

describe("the catalogue", () => {
  let nodeId: string;
  beforeAll(async () => {
    const operator = await h.signIn();
    nodeId = (await h.onlineNode(operator.token, { gpus: [{ name: "H100", vramMb: 81_920 }], hourlyRateCents: 120 })).id;
    await h.onlineNode(operator.token, { region: "us-east" });
  });

  it("lists nodes: --json is the API's JSON, the table filters", async () => {
    const json = await t.cm(["nodes", "--json"], api);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual((await h.call("GET", "/nodes")).json);
    const gpu = await t.cm(["nodes", "--gpu", "--min-vram", "40000", "--region", "eu-west"], api);
    expect(gpu.code).toBe(0);
    const rows = gpu.stdout
      .trim()
      .split("\n")
      .map((l) => l.split("\t"));
    expect(rows).toEqual([[nodeId, "node", "online", "eu-west", "H100 80 GB", "1/1", "32 cores", "125 GB", "120¢/h", "0/4"]]);
    const free = await t.cm(["nodes", "--min-free-gpus", "1"], api);
    expect(
      free.stdout
        .trim()
        .split("\n")
        .map((l) => l.split("\t")[0]),
    ).toEqual([nodeId]);
    expect(gpu.stderr).toBe("page 1 of 1 (1 nodes)\n");
    const show = await t.cm(["nodes", "show", nodeId], api);
    expect(show.stdout).toMatch(/^id: +node_/);
    expect(show.stdout).toContain("gpu 0:");
    const missing = await t.cm(["nodes", "show", "node_nope"], api);
    expect(missing).toMatchObject({ code: 1, stderr: "error NODE_NOT_FOUND: No node has this id.\n" });
  });

  it("lists templates and shows one by slug", async () => {
    const list = await t.cm(["templates", "--json"], api);
    const templates = JSON.parse(list.stdout).templates as Array<{ slug: string; category: string }>;
    expect(templates.length).toBeGreaterThan(0);
    const slug = templates[0]!.slug;
    const show = await t.cm(["templates", "show", slug], api);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`slug:`);
    expect(show.stdout).toContain(slug);
    const llm = await t.cm(["templates", "--category", "llm"], api);
    expect(
      llm.stdout
        .trim()
        .split("\n")
        .every((l) => l.split("\t")[2] === "llm"),
    ).toBe(true);
  });
});

describe("credits and deployments", () => {
  let nodeId: string;
  let userId: string;
  beforeAll(async () => {
    const operator = await h.signIn();
    nodeId = (await h.onlineNode(operator.token)).id;
    userId = JSON.parse((await t.cm(["whoami", "--json"], api)).stdout).user.id;
    await h.grantCredits(userId, 500);
  });

  it("shows the balance, the packages and the ledger", async () => {
    const balance = await t.cm(["credits", "--json"], api);
    expect(JSON.parse(balance.stdout)).toEqual({ balance: { available: 500, reserved: 0, totalUsed: 0 } });
    expect((await t.cm(["credits"], api)).stdout).toMatch(/^available: +500 credits \(\$5\.00\)/);
    const packages = await t.cm(["credits", "packages", "--json"], api);
    expect(JSON.parse(packages.stdout).packages.length).toBeGreaterThan(0);
    const history = await t.cm(["credits", "history", "--type", "deposit"], api);
    expect(history.stdout).toMatch(/\tdeposit\t\+500\ttest grant\t/);
  });

  it("deploys, lists, shows, stops and removes", async () => {
    const created = await t.cm(
      ["deploy", "--image", "nginx:1.27", "--node", nodeId, "--name", "web", "--env", "MODE=prod", "--env", "EMPTY=", "--port", "80"],
      api,
    );
    expect(created.code).toBe(0);
    const id = created.stdout.trim();
    expect(id).toMatch(/^dep_/);
    const api_ = (await h.call("GET", `/deployments/${id}`, { token: await sessionToken() })).json.deployment;
    expect(api_).toMatchObject({ name: "web", image: "nginx:1.27", env: { MODE: "prod", EMPTY: "" }, ports: [80], status: "pending" });

    const ls = await t.cm(["ls"], api);
    expect(ls.stdout).toContain(`${id}\tweb\tpending\tnginx:1.27\t${nodeId}\t0\t`);
    const show = await t.cm(["show", id, "--json"], api);
    expect(JSON.parse(show.stdout).deployment.id).toBe(id);

    const stop = await t.cm(["stop", id], api);
    expect(stop.code).toBe(0);
    // No agent holds the node: stopped at once.
    expect(stop.stderr).toBe(`${id} is stopped (stopped by the tenant).\n`);
    const again = await t.cm(["stop", id], api);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^error INVALID_STATE_TRANSITION: /);
    const start = await t.cm(["start", id, "--json"], api);
    expect(JSON.parse(start.stdout).deployment).toMatchObject({ id, status: "starting" });
    const rm = await t.cm(["rm", id], api);
    expect(rm).toMatchObject({ code: 0, stderr: `deployment ${id} deleted.\n` });
    expect((await t.cm(["show", id], api)).stderr).toMatch(/^error DEPLOYMENT_NOT_FOUND/);
  });

  it("deploys an image with the command after --, an entrypoint and a restart policy, and shows them", async () => {
    const created = await t.cm(
      [
        "deploy",
        "--image",
        "busybox:1.36",
        "--node",
        nodeId,
        "--entrypoint",
        "/bin/sh",
        "--restart",
        "on-failure:5",
        "--",
        "-c",
        "echo $0 and --flags; exit 3",
      ],
      api,
    );
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    const api_ = (await h.call("GET", `/deployments/${id}`, { token: await sessionToken() })).json.deployment;
    expect(api_).toMatchObject({
      command: ["-c", "echo $0 and --flags; exit 3"],
      entrypoint: ["/bin/sh"],
      restart: "on-failure",
      maxRestarts: 5,
      restartCount: 0,
    });
    const show = await t.cm(["show", id], api);
    expect(show.stdout).toMatch(/^command: +\["-c","echo \$0 and --flags; exit 3"\]$/m);
    expect(show.stdout).toMatch(/^restart: +on-failure, 0 of 5 restarts used$/m);
    const plain = await t.cm(["deploy", "--image", "busybox:1.36", "--node", nodeId, "--json"], api);
    expect(JSON.parse(plain.stdout).deployment).toMatchObject({ command: null, entrypoint: null, restart: "no", maxRestarts: 0 });
    for (const dep of [id, JSON.parse(plain.stdout).deployment.id]) await t.cm(["rm", dep], api);
  });

  it("deploys with the resources asked for, shows what it holds, and says which resource a node lacks", async () => {
    const created = await t.cm(["deploy", "--image", "busybox:1.36", "--node", nodeId, "--cpus", "1.5", "--memory", "2048", "--disk", "5", "--json"], api);
    expect(created.code, created.stderr).toBe(0);
    const d = JSON.parse(created.stdout).deployment;
    expect(d).toMatchObject({ gpuCount: 0, cpuCores: 1.5, memoryMb: 2048, diskGb: 5 });
    expect((await t.cm(["show", d.id], api)).stdout).toMatch(/^holds: +0 GPUs, 1\.5 cores, 2048 MB memory, 5 GB disk$/m);
    const noGpu = await t.cm(["deploy", "--image", "busybox:1.36", "--node", nodeId, "--gpus", "1"], api);
    expect(noGpu).toMatchObject({ code: 1, stderr: expect.stringMatching(/^error NODE_INSUFFICIENT_GPUS: /) });
    expect((await t.cm(["deploy", "--image", "x", "--node", nodeId, "--cpus", "two"], api)).stderr).toMatch(/--cpus takes a number/);
    await t.cm(["rm", d.id], api);
  });

  it("logs -f follows until Ctrl-C, then exits 130 with no stack trace", async () => {
    const id = (await t.cm(["deploy", "--image", "nginx:1.27", "--node", nodeId], api)).stdout.trim();
    const child = spawn(join(import.meta.dirname, "../../../node_modules/.bin/tsx"), ["apps/cli/src/index.ts", "logs", id, "-f"], {
      cwd: join(import.meta.dirname, "../../.."),
      env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), CM_API_URL: h.url },
    });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += String(d);
    });
    await new Promise((r) => setTimeout(r, 4_000));
    child.kill("SIGINT");
    const code = await new Promise((done) => child.on("exit", (c) => done(c)));
    expect(code).toBe(130);
    expect(stderr).toBe("");
    await t.cm(["rm", id], api);
  });

  it("exits 0 with nothing on stderr when the reader of its output goes away (cm ls | head -1)", async () => {
    const ids = [];
    for (const name of ["a", "b"]) ids.push((await t.cm(["deploy", "--image", "nginx:1.27", "--node", nodeId, "--name", name], api)).stdout.trim());
    // `true` leaves before cm writes a byte; `head -1` after the first line: before the fix 1 run in 3
    // of show ended with an unhandled `write EPIPE`, a stack trace and exit 1.
    const pipeline = (command: string, reader: string) =>
      new Promise<CliResult>((done) => {
        const script = `${TSX} ${ENTRY} ${command} | ${reader}; echo "cm exited \${PIPESTATUS[0]}" >&2`;
        execFile(
          "bash",
          ["-c", script],
          { cwd: ROOT, env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), ...api } },
          (err, stdout, stderr) => done({ code: err ? -1 : 0, stdout, stderr }),
        );
      });
    const runs = await Promise.all(
      ["ls", `show ${ids[0]}`].flatMap((command) => ["true", ...Array(4).fill("head -1")].map((reader) => pipeline(command, reader))),
    );
    for (const r of runs) expect(r.stderr.replace(/^page .*\n/, "")).toBe("cm exited 0\n");
    expect(runs[1]!.stdout).toMatch(/^dep_\S+\t[ab]\t.*\n$/);
    expect(runs[6]!.stdout).toBe(`${"id:".padEnd(12)}${ids[0]}\n`);
    for (const id of ids) await t.cm(["rm", id], api);
  });

  it("ssh asks the control plane first, as port-forward does, and runs no ssh for a port the deployment did not declare", async () => {
    const id = (await t.cm(["deploy", "--image", "busybox:1.36", "--node", nodeId], api)).stdout.trim();
    // An ssh that only notes that it ran: before the check, cm started it for any port.
    const bin = join(t.home, "fake-ssh");
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, "ssh"), `#!/bin/sh\n[ "$1" = -V ] && exit 0\necho "$@" >> ${join(bin, "ran")}\n`, { mode: 0o755 });
    const r = await t.cm(["ssh", id, "--port", "2222"], { ...api, PATH: `${bin}:${process.env.PATH ?? ""}` });
    expect(r).toMatchObject({ code: 1, stdout: "" });
    expect(r.stderr).toMatch(/^error (TCP_PORT_NOT_DECLARED|DEPLOYMENT_NOT_RUNNING): /);
    expect(readdirSync(bin)).toEqual(["ssh"]);
    await t.cm(["rm", id], api);
  });

  it("refuses a deployment it cannot pay for, with the API's code", async () => {
    const other = terminal({ CM_API_URL: h.url });
    other.keypair();
    await other.cm(["login"]);
    const r = await other.cm(["deploy", "--image", "nginx:1.27", "--node", nodeId]);
    other.close();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error INSUFFICIENT_CREDITS: /);
  });

  async function sessionToken(): Promise<string> {
    const { readFileSync, readdirSync } = await import("node:fs");
    const dir = join(t.home, ".config/cm/sessions");
    return JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]!), "utf8")).accessToken;
  }
});

describe("operators", () => {
  it("enrols a node, prints the agent command, lists and retires it", async () => {
    const add = await t.cm(["operator", "add", "--name", "box-1", "--region", "eu-central", "--country", "de", "--rate", "75", "--max", "2"], api);
    expect(add.code).toBe(0);
    const [id, command] = add.stdout.trim().split("\n");
    expect(id).toMatch(/^node_/);
    // The release's installer, the token in the environment, not in an argument every local user reads with ps.
    expect(command).toMatch(new RegExp(`^AGENT_TOKEN=cmn_\\S+ sudo --preserve-env=AGENT_TOKEN bash install-cm-agent\\.sh --control-plane ${h.url}$`));
    expect(add.stderr).toContain("in a directory holding a release's install-cm-agent.sh, its cm-agent tarball and SHA256SUMS");
    // cm runs from a checkout here: the checkout's ways follow, on stderr.
    expect(add.stderr).toMatch(/AGENT_TOKEN=cmn_\S+ sudo --preserve-env=AGENT_TOKEN scripts\/install-agent\.sh --control-plane /);
    expect(add.stderr).toMatch(new RegExp(`AGENT_TOKEN=cmn_\\S+ npm run agent -- --control-plane ${h.url}\\)`));
    expect(`${add.stdout}${add.stderr}`).not.toContain("--token");
    const nodes = await t.cm(["operator", "nodes"], api);
    expect(nodes.stdout).toContain(`${id}\tbox-1\toffline\teu-central\t-\t75¢/h\t0/2\t-\tnever`);
    expect((await t.cm(["whoami"], api)).stdout).toMatch(/operator: +yes/);
    // Nobody to ask without a terminal: a script must say --yes.
    const unconfirmed = await t.cm(["operator", "retire", id!], api);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toMatch(new RegExp(`^error: retiring ${id} cannot be undone and stops what runs there; pass --yes`));
    expect((await t.cm(["operator", "nodes"], api)).stdout).toContain(id);
    const retire = await t.cm(["operator", "retire", id!, "--yes"], api);
    expect(retire).toMatchObject({ code: 0, stderr: `node ${id} retired.\n` });
    expect((await t.cm(["operator", "nodes", "--json"], api)).stdout).not.toContain(id);
    // Still on its operator's records.
    const all = await t.cm(["operator", "nodes", "--all"], api);
    expect(all.stdout).toMatch(new RegExp(`^${id}\tbox-1\tretired \\d{4}-\\d\\d-\\d\\dT\\S+\teu-central\t`, "m"));
  });

  it("the released cm (one bundled file) prints the release's installer alone, naming no checkout", async () => {
    const out = mkdtempSync(join(tmpdir(), "cm-bundle-"));
    try {
      const { file } = await buildApp("cli", { outDir: out });
      const add = await new Promise<CliResult>((done) =>
        execFile(
          process.execPath,
          [file, "operator", "add", "--name", "box-3", "--region", "eu-west", "--country", "DE", "--rate", "10", "--max", "1"],
          { cwd: out, env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), NO_COLOR: "1", ...api } },
          (err, stdout, stderr) => done({ code: err ? Number(err.code) : 0, stdout, stderr }),
        ),
      );
      expect(add.code, add.stderr).toBe(0);
      const [id, command, ...rest] = add.stdout.trim().split("\n");
      expect(id).toMatch(/^node_/);
      expect(command).toMatch(new RegExp(`^AGENT_TOKEN=cmn_\\S+ sudo --preserve-env=AGENT_TOKEN bash install-cm-agent\\.sh --control-plane ${h.url}$`));
      expect(rest).toEqual([]);
      expect(add.stderr).not.toMatch(/npm run|scripts\//);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 60_000);

  // util-linux's `script` (Debian's bsdutils) runs a command at a terminal of its own.
  const hasScript = spawnSync("script", ["--version"], { encoding: "utf8" }).stdout?.includes("util-linux") === true;
  it.skipIf(!hasScript)("at a terminal, says what runs on the node and retires it only on yes", async () => {
    const id = (await t.cm(["operator", "add", "--name", "box-2", "--region", "eu-west", "--country", "DE", "--rate", "10", "--max", "1"], api)).stdout.split(
      "\n",
    )[0]!;
    // `script` gives cm a terminal of its own and types the answer into it. Not spawnSync: the control plane runs in this process.
    const atTerminal = (answer: string) =>
      new Promise<string>((done) => {
        const child = spawn("script", ["-qec", `${TSX} ${ENTRY} operator retire ${id}`, "/dev/null"], {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), NO_COLOR: "1", ...api },
        });
        let out = "";
        child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
        child.on("close", () => done(out));
        child.stdin.end(answer);
      });
    const no = await atTerminal("n\n");
    expect(no).toContain(`box-2 (${id}, offline) runs no deployment.`);
    expect(no).toContain("This cannot be undone.");
    expect(no).toContain("Retire box-2? [y/N]");
    expect(no).toContain("Not retired.");
    expect((await t.cm(["operator", "nodes"], api)).stdout).toContain(id);
    expect(await atTerminal("y\n")).toContain(`node ${id} retired.`);
    expect((await t.cm(["operator", "nodes"], api)).stdout).not.toContain(id);
  });

  it("refuses an enrolment the API finds wrong, naming the field", async () => {
    const r = await t.cm(["operator", "add", "--name", "x", "--region", "mars", "--country", "DE", "--rate", "1", "--max", "1"], api);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error VALIDATION_ERROR: .*region/);
  });
});

describe("what a command loads", () => {
  it("nodes and --version load neither the chain libraries nor zod", async () => {
    for (const args of [["--version"], ["nodes", "--json"]]) {
      const trace = join(t.home, `trace-${args[0]}.txt`);
      const r = await new Promise<{ code: number | null }>((done) => {
        const child = spawn(
          process.execPath,
          ["--import", join(import.meta.dirname, "support/trace-imports.mjs"), "--import", "tsx", "apps/cli/src/index.ts", ...args],
          {
            cwd: join(import.meta.dirname, "../../.."),
            env: { PATH: process.env.PATH ?? "", HOME: t.home, CM_API_URL: h.url, CM_TRACE_FILE: trace },
            stdio: "ignore",
          },
        );
        child.on("exit", (code) => done({ code }));
      });
      expect(r.code).toBe(0);
      const loaded = readFileSync(trace, "utf8");
      expect(loaded).toContain("apps/cli/src/index.ts");
      expect(loaded).not.toMatch(/@solana|\/zod\//);
    }
  });
});

describe("logout", () => {
  it("revokes the session on the API and forgets it here", async () => {
    const dir = join(t.home, ".config/cm/sessions");
    const session = JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]!), "utf8"));
    const out = await t.cm(["logout"], api);
    expect(out).toMatchObject({ code: 0, stderr: `Signed out of ${h.url}.\n` });
    expect(readdirSync(dir)).toEqual([]);
    expect((await t.cm(["whoami"], api)).stderr).toMatch(/^error NOT_SIGNED_IN/);
    expect((await h.call("GET", "/auth/me", { token: session.accessToken })).status).toBe(401);
    // A session ended elsewhere (its file left here): the refusal names the command that helps.
    writeFileSync(join(dir, `${h.url.replace("http://", "").replace(/[^A-Za-z0-9.-]+/g, "_")}.json`), JSON.stringify(session));
    const stale = await t.cm(["whoami"], api);
    expect(stale).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^error UNAUTHORIZED: .* \(cm sent the session `cm login` saved: sign in again with `cm login`\)\n$/),
    });
    expect((await h.call("POST", "/auth/refresh", { body: { refreshToken: session.refreshToken } })).json.error.code).toBe("INVALID_REFRESH_TOKEN");
  });
});
