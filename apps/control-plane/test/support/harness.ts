import { creditsToMicro } from "@cm/db";
import type { TestDatabase } from "@cm/db/testing";
import bs58 from "bs58";
import nacl from "tweetnacl";
import { type Config, testConfig } from "../../src/config";
import { createDeps, type Deps, type DepsOverrides } from "../../src/deps";
import { startServer } from "../../src/server";
import { type Clock, systemClock } from "../../src/services/ids";
import { createLogger } from "../../src/services/logger";

/** A clock the test moves by hand: token expiry and metering without sleeping. */
export class TestClock implements Clock {
  private readonly timers = new Set<{ everyMs: number; dueMs: number; fn: () => void }>();
  /**
   * With `manual`, periodic work (liveness checks, the streams' fallback read,
   * metering) runs only as advance() passes its time; without, on real timers,
   * so a test that only moves the time for expiries still sees it run.
   */
  constructor(
    public ms = Date.UTC(2026, 10, 1, 12, 0, 0),
    private readonly o: { manual?: boolean } = {},
  ) {}
  now = () => this.ms;
  every = (everyMs: number, fn: () => void) => {
    if (!this.o.manual) return systemClock.every(everyMs, fn);
    const timer = { everyMs, dueMs: this.ms + everyMs, fn };
    this.timers.add(timer);
    return () => void this.timers.delete(timer);
  };
  /** Moves the time on by `ms`, running each periodic task as often, and when, its period falls due. */
  advance(ms: number) {
    const until = this.ms + ms;
    for (;;) {
      let next: { everyMs: number; dueMs: number; fn: () => void } | undefined;
      for (const t of this.timers) if (t.dueMs <= until && (!next || t.dueMs < next.dueMs)) next = t;
      if (!next) break;
      this.ms = next.dueMs;
      next.dueMs += next.everyMs;
      next.fn();
    }
    this.ms = until;
  }
}

export type Wallet = { address: string; secretKey: Uint8Array; sign(message: string): string };

export function newWallet(): Wallet {
  const kp = nacl.sign.keyPair();
  return {
    address: bs58.encode(kp.publicKey),
    secretKey: kp.secretKey,
    sign: (message) => Buffer.from(nacl.sign.detached(new TextEncoder().encode(message), kp.secretKey)).toString("base64"),
  };
}

export type Harness = Awaited<ReturnType<typeof startHarness>>;

/** The real server on a real socket (port 0) over the given database. */
export async function startHarness(db: TestDatabase, opts: { config?: Partial<Config>; overrides?: DepsOverrides; port?: number } = {}) {
  const created = await db.create();
  const clock = new TestClock();
  // The deposit watcher runs when a test calls deps.depositWatcher.tick(): on a timer it would take the RPC faults a test injects.
  const config = testConfig({ DATABASE_URL: created.url, LOG_LEVEL: "silent", AUTH_RATE_LIMIT_PER_MIN: 10_000, DEPOSIT_WATCH_INTERVAL_MS: 0, ...opts.config });
  const deps: Deps = await createDeps(config, { clock, log: createLogger("silent"), ...opts.overrides });
  const server = await startServer(deps, { port: opts.port ?? 0, host: "127.0.0.1" });

  async function call(method: string, path: string, init: { body?: unknown; token?: string; headers?: Record<string, string>; raw?: string } = {}) {
    const headers: Record<string, string> = { ...init.headers };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    let body: string | undefined = init.raw;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers["content-type"] ??= "application/json";
    }
    const res = await fetch(server.url + path, { method, headers, body });
    const text = await res.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, json, text };
  }

  async function signIn(wallet = newWallet()) {
    const n = await call("POST", "/auth/nonce", { body: { walletAddress: wallet.address } });
    const v = await call("POST", "/auth/verify", { body: { walletAddress: wallet.address, message: n.json.message, signature: wallet.sign(n.json.message) } });
    if (v.status !== 200) throw new Error(`sign-in failed: ${v.status} ${v.text}`);
    return {
      wallet,
      token: v.json.accessToken as string,
      refreshToken: v.json.refreshToken as string,
      user: v.json.user as { id: string; walletAddress: string; isOperator: boolean },
    };
  }

  /** Credits a user through the ledger, as the admin command does. */
  async function grantCredits(userId: string, credits: number) {
    await deps.repos.handle.transaction((tx) =>
      deps.repos.ledger.post(tx, {
        id: deps.ids("txn"),
        userId,
        type: "deposit",
        amountMicro: creditsToMicro(credits),
        description: "test grant",
        createdAt: clock.now(),
      }),
    );
  }

  /** An operator's node, brought online with the given inventory as an agent would report it. */
  async function onlineNode(
    operatorToken: string,
    o: {
      gpus?: Array<{ name: string; vramMb: number }>;
      cpuCores?: number;
      ramMb?: number;
      hourlyRateCents?: number;
      maxDeployments?: number;
      region?: string;
      /** the node's disk (specs.diskGb), 2000 by default, and the allowance its agent gives a custom image (AGENT_DISK_DEFAULT_GB), unsaid by default */
      diskGb?: number;
      diskDefaultGb?: number;
    } = {},
  ) {
    const r = await call("POST", "/operator/nodes", {
      token: operatorToken,
      body: { name: "node", region: o.region ?? "eu-west", country: "DE", hourlyRateCents: o.hourlyRateCents ?? 50, maxDeployments: o.maxDeployments ?? 4 },
    });
    if (r.status !== 201) throw new Error(`node create failed: ${r.text}`);
    const id = r.json.node.id as string;
    await deps.repos.nodes.updateInventory(
      id,
      {
        cpuModel: "AMD EPYC 7763",
        cpuCores: o.cpuCores ?? 32,
        cpuThreads: (o.cpuCores ?? 32) * 2,
        ramMb: o.ramMb ?? 128_000,
        diskGb: o.diskGb ?? 2000,
        diskType: "NVMe",
        networkSpeedMbps: 10_000,
        os: "Ubuntu 22.04",
        containerVersion: "27.0.3",
      },
      (o.gpus ?? []).map((g) => ({ ...g, computeVersion: "9.0", brand: "NVIDIA", computeCores: 16896, tensorCores: 528, driverVersion: "550.54.15" })),
      { egressPolicy: null, diskDefaultGb: o.diskDefaultGb ?? null },
    );
    await deps.repos.nodes.markOnline(id, clock.now());
    deps.events.emit("node-changed", id);
    return { id, agentToken: r.json.agentToken as string };
  }

  /** Every node offline, so that placement (which looks at every online node) sees only the ones a test brings up next. */
  async function takeAllNodesOffline() {
    for (const n of await deps.repos.nodes.online()) await deps.repos.nodes.markOffline(n.id);
  }

  return {
    url: server.url,
    deps,
    clock,
    call,
    signIn,
    grantCredits,
    onlineNode,
    takeAllNodesOffline,
    close: async () => {
      await server.close();
      await deps.close();
      await created.drop();
    },
  };
}
