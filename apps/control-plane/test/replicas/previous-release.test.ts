// A rolling upgrade across a migration (issue 41): the replicas are upgraded one at a
// time, so the release before keeps serving on a database this build migrated. Its
// real source (the commit that recorded it in releases.json) runs as its own process:
// it writes rows, this build migrates the database and writes more (on PostgreSQL with
// the previous release serving through it), and the previous release, started on it,
// warns that it is a release behind, answers /ready, signs in, lists its node, reads
// both releases' rows and creates a deployment that reaches its node's agent. On a
// SQLite file and on PostgreSQL.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { creditsToMicro, openRepos, RUNNABLE_FROM_KEY, type RunnableFrom, readJournal } from "@cm/db";
import { createPgDatabase } from "@cm/db/testing";
import { needs } from "@cm/testkit";
import Database from "better-sqlite3";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimAgent } from "../agents/support/sim-agent";
import { type Program, startProgram } from "../faults/support/processes";
import { newWallet } from "../support/harness";
import { aheadOf, type PreviousRelease, unpackPreviousRelease } from "./support/previous-release";

let unpacked: Promise<PreviousRelease> | undefined;
const previousRelease = () => (unpacked ??= unpackPreviousRelease());
afterAll(async () => (await unpacked?.catch(() => undefined))?.remove());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startPrevious(release: PreviousRelease, databaseUrl: string, home: string): Promise<{ program: Program; url: string }> {
  const program = startProgram(
    `control plane ${release.version}`,
    "apps/control-plane/src/index.ts",
    [],
    { PORT: "0", HOST: "127.0.0.1", DATABASE_URL: databaseUrl, CM_HOME: home, LOG_LEVEL: "info", HEARTBEAT_INTERVAL_MS: "2000" },
    { cwd: release.root },
  );
  const line = await program.waitForLine(/control plane listening on/, 60_000);
  return { program, url: /listening on (http:\/\/\S+?)"?[,}\s]/.exec(`${line} `)![1]! };
}

/** What a next release with one expand migration leaves in the database (client.ts's openSqlite and openPg, written out). */
async function expandAsTheNextRelease(engine: "sqlite" | "pg", url: string, release: PreviousRelease) {
  const journal = readJournal(engine);
  const migratedToMs = journal.at(-1)!.when + 60_000;
  const word: RunnableFrom = {
    release: release.version,
    migrationMs: journal.find((j) => j.tag === release.lastMigration)!.when,
    migratedBy: `the release after ${release.version} (made by this test)`,
    migratedToMs,
  };
  const statements = [
    "alter table nodes add column upgrade_probe text",
    "create table upgrade_probe (id text primary key not null, note text)",
    `insert into ${engine === "sqlite" ? "__drizzle_migrations" : "drizzle.__drizzle_migrations"} (hash, created_at) values ('upgrade-probe', ${migratedToMs})`,
    `update settings set value = '${JSON.stringify(word)}' where key = '${RUNNABLE_FROM_KEY}'`,
  ];
  if (engine === "sqlite") {
    const db = new Database(url.slice("file:".length));
    try {
      db.transaction(() => {
        for (const s of statements) db.exec(s);
      })();
    } finally {
      db.close();
    }
  } else {
    const sql = postgres(url, { max: 1, onnotice: () => undefined });
    try {
      await sql.begin(async (tx) => {
        for (const s of statements) await tx.unsafe(s);
      });
    } finally {
      await sql.end();
    }
  }
}

function suite(engine: "sqlite" | "pg") {
  let release: PreviousRelease;
  let url = "";
  let drop: () => Promise<void> = async () => undefined;
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `cm-previous-${engine}-`));
  const programs: Program[] = [];

  beforeAll(async () => {
    release = await previousRelease();
    if (engine === "sqlite") url = `file:${path.join(home, "marketplace.db")}`;
    else {
      const made = await createPgDatabase();
      url = made.url;
      drop = made.drop;
    }
  }, 60_000);
  afterAll(async () => {
    for (const p of programs) await p.stop();
    await drop();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it("the release before serves on the database this build migrated: ready, sign-in, catalogue, old rows, a new deployment reaching its agent", async () => {
    const wallet = newWallet();
    const json = async (base: string, method: string, p: string, token?: string, body?: unknown) => {
      const res = await fetch(base + p, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { "content-type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(15_000),
      });
      const out = (await res.json()) as any;
      if (!res.ok) throw new Error(`${release.version}: ${method} ${p}: ${res.status} ${JSON.stringify(out)}`);
      return out;
    };
    const signIn = async (base: string) => {
      const nonce = await json(base, "POST", "/auth/nonce", undefined, { walletAddress: wallet.address });
      return json(base, "POST", "/auth/verify", undefined, { walletAddress: wallet.address, message: nonce.message, signature: wallet.sign(nonce.message) });
    };

    // The previous release on a new database, as before the upgrade: an account and its node.
    const before = await startPrevious(release, url, home);
    programs.push(before.program);
    const first = await signIn(before.url);
    const node = await json(before.url, "POST", "/operator/nodes", first.accessToken, {
      name: "upgrade-node",
      region: "eu-west",
      country: "DE",
      hourlyRateCents: 120,
      maxDeployments: 4,
    });
    // The embedded database is one process's: stopped for the upgrade. On PostgreSQL it stays up
    // through the migration, as a replica not yet upgraded does.
    if (engine === "sqlite") await before.program.stop();

    // This build migrates it (as the first replica upgraded does) and writes: credits on the account.
    const repos = await openRepos(url);
    try {
      expect(repos.handle.newerRelease).toBeUndefined();
      await repos.handle.transaction((tx) =>
        repos.ledger.post(tx, {
          id: `txn_upgrade_${Date.now()}`,
          userId: first.user.id,
          type: "deposit",
          amountMicro: creditsToMicro(500),
          description: "written by the newer release",
          createdAt: Date.now(),
        }),
      );
    } finally {
      await repos.handle.close();
    }

    // Until this build ships a migration of its own, the database gets the next release's kind of
    // one as that release would leave it: a nullable column on a table the previous release writes, a
    // table, its row in drizzle's journal and its word on who may run the database.
    const expanded = !aheadOf(release.lastMigration, engine);
    if (expanded) await expandAsTheNextRelease(engine, url, release);

    if (engine === "pg") {
      // The replica that ran through the migration still serves: a sign-in, the credit written since, its node.
      const through = await signIn(before.url);
      expect((await json(before.url, "GET", "/credits/balance", through.accessToken)).balance.available).toBe(500);
      expect((await json(before.url, "GET", "/operator/nodes", through.accessToken)).nodes).toHaveLength(1);
      expect(before.program.lines.filter((l) => /"level":"error"/.test(l))).toEqual([]);
    }

    // The previous release (again, on the embedded database), started on the migrated database.
    const after = await startPrevious(release, url, home);
    programs.push(after.program);
    const warned = after.program.lines.find((l) => l.includes("which the release before it may still run"));
    expect(warned, `${release.version} on a database one release ahead says so:\n${after.program.tail()}`).toContain(
      `this one (${release.version}) runs on it and migrates nothing`,
    );
    expect(after.program.lines.filter((l) => /"level":"error"/.test(l))).toEqual([]);

    expect((await fetch(`${after.url}/ready`)).status).toBe(200);
    const again = await signIn(after.url);
    expect(again.user.id).toBe(first.user.id);
    const token = again.accessToken as string;
    expect((await json(after.url, "GET", "/credits/balance", token)).balance.available).toBe(500);
    const mine = await json(after.url, "GET", "/operator/nodes", token);
    expect(mine.nodes.map((n: { id: string }) => n.id)).toEqual([node.node.id]);

    // Its node's agent (at the protocol level) connects to it; the catalogue offers the node.
    const { agent } = await SimAgent.connect(after.url, node.agentToken);
    let deploymentId = "";
    // Beating as a real agent does (its interval is HEARTBEAT_INTERVAL_MS's), or the node goes silent.
    const beats = setInterval(() => agent.heartbeat(deploymentId ? [deploymentId] : []), 500);
    try {
      // Online, not only listed: the catalogue lists offline nodes too, and a create before the agent's
      // inventory lands is refused NODE_OFFLINE (seen once in CI, under load).
      const online = (n: { id: string; status: string }) => n.id === node.node.id && n.status === "online";
      for (let i = 0; !(await json(after.url, "GET", "/nodes")).nodes.some(online); i++) {
        if (i > 200) throw new Error("the node never came online in the catalogue");
        await sleep(50);
      }
      const created = await json(after.url, "POST", "/deployments", token, { nodeId: node.node.id, customImage: "busybox:1.36" });
      deploymentId = created.deployment.id;
      const command = await agent.command(created.deployment.id, "create");
      agent.report(command.deployment, "pulling");
      agent.report(command.deployment, "starting");
      agent.report(command.deployment, "running");
      for (let i = 0; (await json(after.url, "GET", `/deployments/${created.deployment.id}`, token)).deployment.status !== "running"; i++) {
        if (i > 200) throw new Error("the deployment never ran");
        await sleep(50);
      }
      const listed = await json(after.url, "GET", "/deployments", token);
      expect(listed.deployments.map((d: { id: string }) => d.id)).toEqual([created.deployment.id]);
    } finally {
      clearInterval(beats);
      await agent.close();
    }
    await after.program.stop();
    await before.program.stop();

    // And this build reads what the previous release wrote on its database.
    const reread = await openRepos(url);
    try {
      // The next release's migration (where the test made one) is ahead of this build too, which runs on it alike.
      if (expanded) expect(reread.handle.newerRelease).toContain("the release before it may still run");
      else expect(reread.handle.newerRelease).toBeUndefined();
      expect(await reread.deployments.get(deploymentId, first.user.id)).toMatchObject({ status: "running", nodeId: node.node.id });
    } finally {
      await reread.handle.close();
    }
  }, 90_000);
}

describe("the release before this one, on a SQLite file this build migrated", () => suite("sqlite"));
needs("postgres").describe("the release before this one, on a PostgreSQL database this build migrated", () => suite("pg"));
