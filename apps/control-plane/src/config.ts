import { z } from "zod";
import { resolveDatabaseUrl } from "./database-location";
import { parseTrustedProxies } from "./http/client-address";
import { sharedCookieScope } from "./http/cookie-scope";
import { parseRegistryKey } from "./services/registry-secrets";

/**
 * Everything the control plane reads from its environment, parsed once. Nothing
 * else in the app reads process.env: tests build a Config by hand.
 */
export const ConfigSchema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    HOST: z.string().default("127.0.0.1"),
    /** A relative SQLite path is read from the repository root, whichever directory the command runs in (database-location.ts). */
    DATABASE_URL: z.string().default("file:./data/marketplace.db").transform(resolveDatabaseUrl),
    /** The domain a wallet binds the sign-in message to; defaults to HOST:PORT. */
    PUBLIC_DOMAIN: z.string().optional(),
    SOLANA_RPC_URL: z.string().url().default("https://api.mainnet-beta.solana.com"),
    SOLANA_COMMITMENT: z.enum(["confirmed", "finalized"]).default("confirmed"),
    TREASURY_WALLET: z.string().default(""),
    STABLE_MINT: z.string().default("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"),
    STABLE_DECIMALS: z.coerce.number().int().min(0).max(12).default(6),
    GATEWAY_DOMAIN: z.string().default("localhost"),
    ACCESS_TOKEN_TTL_S: z.coerce
      .number()
      .int()
      .min(10)
      .default(15 * 60),
    REFRESH_TOKEN_TTL_S: z.coerce
      .number()
      .int()
      .min(60)
      .default(30 * 24 * 3600),
    NONCE_TTL_S: z.coerce
      .number()
      .int()
      .min(10)
      .default(5 * 60),
    DEPOSIT_TTL_S: z.coerce
      .number()
      .int()
      .min(60)
      .default(30 * 60),
    /**
     * How long after expiresAt a payment whose block time is before it is still
     * credited: a wallet's payment lands on time and is seen (by the watcher or a
     * late confirm) a little after. Payments after expiresAt are refused regardless.
     */
    DEPOSIT_GRACE_S: z.coerce
      .number()
      .int()
      .min(0)
      .default(10 * 60),
    /**
     * Deposits one account may hold pending and unexpired at once. A wallet app
     * needs one at a time; without a bound one account opened 5,000 in 24 s
     * (issue 36), each a reference the watcher may be asked about.
     */
    MAX_OPEN_DEPOSITS: z.coerce.number().int().min(1).default(20),
    /** How often the deposit watcher looks for payments by reference; 0 turns it off (deposits then credit by confirm only). */
    DEPOSIT_WATCH_INTERVAL_MS: z.coerce
      .number()
      .int()
      .refine((ms) => ms === 0 || ms >= 100, "0 (off) or at least 100")
      .default(2_000),
    AUTH_RATE_LIMIT_PER_MIN: z.coerce.number().int().min(1).default(60),
    /**
     * Reverse proxies whose X-Forwarded-For the control plane believes when it
     * tells clients apart (the rate limiter): addresses or CIDRs, comma-separated.
     * Empty: every client is its socket's address.
     */
    TRUSTED_PROXIES: z
      .string()
      .default("")
      .superRefine((list, ctx) => {
        try {
          parseTrustedProxies(list);
        } catch (error) {
          ctx.addIssue({ code: "custom", message: (error as Error).message });
        }
      }),
    MAX_BODY_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .default(1024 * 1024),
    /** Nodes one account may operate at once (retired ones do not count): far more than a real operator runs. */
    MAX_NODES_PER_ACCOUNT: z.coerce.number().int().min(1).default(1000),
    /** Node registrations one account may make per hour, on each replica. */
    NODE_REGISTRATIONS_PER_HOUR: z.coerce.number().int().min(1).default(60),
    HEARTBEAT_INTERVAL_MS: z.coerce.number().int().min(100).default(10_000),
    /** How long a node may stay unreachable before its deployments end (agents/node-contact.ts); until then they are left as they are. */
    NODE_LOST_AFTER_S: z.coerce.number().int().min(1).default(300),
    /** How long a lost node's returning agent keeps the stopped container of a deployment that ended with it, its files with it. */
    LOST_RETENTION_S: z.coerce.number().int().min(0).default(86_400),
    /** How often lastHeartbeat is written for all nodes at once (see agents/heartbeat-batch.ts). */
    HEARTBEAT_FLUSH_MS: z.coerce.number().int().min(10).default(1000),
    /** An agent that sends no hello this long after connecting is closed with 4408. */
    AGENT_HELLO_TIMEOUT_MS: z.coerce.number().int().min(10).default(5_000),
    /** The largest frame read from an agent; log batches are split below it (it is announced in welcome). */
    AGENT_MAX_FRAME_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .default(16 * 1024 * 1024),
    /** Log text one node may store per second on average (bursts of 4 s); past it batches are refused and the agent sends them again later. */
    LOG_INGEST_BYTES_PER_S: z.coerce
      .number()
      .int()
      .min(1024)
      .default(8 * 1024 * 1024),
    /** The streams read the store this often when no notice came: how late a line or a change from another replica may arrive. */
    STREAM_FALLBACK_MS: z.coerce.number().int().min(10).default(1_000),
    /** With PostgreSQL (several replicas): how often a replica reads recent moves for a command whose wake-up it missed. */
    COMMAND_SWEEP_MS: z.coerce.number().int().min(100).default(5_000),
    /** With several replicas: where the others reach this one (http://10.0.0.5:8080), to carry to it what needs an agent session it holds. */
    REPLICA_ADDRESS: z.url({ protocol: /^http$/ }).optional(),
    /** With several replicas: the same secret on each (32 characters or more), proving a carried request is a replica's. */
    REPLICA_SECRET: z.string().min(32).optional(),
    /** Server-Sent Events streams (logs/stream, events) one account may hold open at once, on each replica; past it RATE_LIMITED. */
    MAX_STREAMS_PER_ACCOUNT: z.coerce.number().int().min(1).default(100),
    /** The same for the streams of one deployment. */
    MAX_STREAMS_PER_DEPLOYMENT: z.coerce.number().int().min(1).default(20),
    /** An exec session with no input and no output for this long is ended (IDLE_TIMEOUT, close code 4408). */
    EXEC_IDLE_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(100)
      .default(15 * 60_000),
    /**
     * How often open streams and exec sessions ask the database whether their
     * sign-in was revoked: how late a sign-out on another replica ends them
     * (one on this replica ends them at once).
     */
    REVOCATION_CHECK_MS: z.coerce.number().int().min(10).default(10_000),
    /** A bearer token Prometheus sends for GET /metrics; unset, /metrics answers only requests from this machine (the loopback). */
    METRICS_TOKEN: z.string().min(16).optional(),
    /** Public endpoints: from a request to the first byte of the container's answer. */
    GATEWAY_RESPONSE_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
    /** Public endpoints: no byte either way for this long ends a request, a stream or a WebSocket. */
    GATEWAY_IDLE_TIMEOUT_MS: z.coerce.number().int().min(100).default(300_000),
    /** Public endpoints: how long a node's agent has to open a tunnel. */
    TUNNEL_OPEN_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
    /** PEM files: when both are set the listener speaks HTTPS (a wildcard certificate for *.GATEWAY_DOMAIN covers every endpoint). */
    TLS_CERT: z.string().optional(),
    TLS_KEY: z.string().optional(),
    /** How often running deployments are charged; they are also charged whenever they stop. */
    METER_INTERVAL_MS: z.coerce.number().int().min(100).default(60_000),
    /** The platform's share of every usage charge, in whole percent; the node's operator earns the rest. */
    PLATFORM_FEE_PERCENT: z.coerce.number().int().min(0).max(100).default(10),
    /** How long an operator's earnings stay pending (a refund comes out of them first) before they are available. */
    EARNINGS_HOLD_HOURS: z.coerce.number().int().min(0).max(8760).default(24),
    /**
     * The hot wallet's keypair file (the Solana CLI's JSON array of 64 bytes) that
     * payouts are sent from. Unset: this installation does not pay out. Refused at
     * start unless only its owner may read it (mode 0600); the key is never logged.
     */
    PAYOUT_KEYPAIR: z.string().default(""),
    /**
     * The key that seals tenants' registry passwords (AES-256-GCM): 32 bytes as 64
     * hex digits or base64 (openssl rand -base64 32), the same on every replica.
     * Unset: the embedded database keeps a key of its own in registry-credentials.key
     * beside it (made 0600 at first start); with PostgreSQL, credentials are
     * refused (REGISTRY_CREDENTIALS_NOT_CONFIGURED) until it is set. Never logged.
     */
    REGISTRY_CREDENTIALS_KEY: z
      .string()
      .default("")
      .refine(
        (k) => k === "" || parseRegistryKey(k) !== undefined,
        "must be 32 bytes, written as 64 hex digits or 44 characters of base64 (openssl rand -base64 32)",
      ),
    /** manual: requests wait for `npm run admin -- payouts approve`; auto: they are sent at once, within PAYOUT_DAILY_LIMIT_CREDITS. */
    PAYOUTS: z.enum(["manual", "auto"]).default("manual"),
    /** The smallest payout an operator may request, in credits (1 credit = 1 US cent). */
    PAYOUT_MIN_CREDITS: z.coerce.number().int().min(1).default(2_000),
    /** PAYOUTS=auto: the most approved in any 24 hours, all operators together; past it requests wait. */
    PAYOUT_DAILY_LIMIT_CREDITS: z.coerce.number().int().min(0).default(100_000),
    /** How often the payout sender sends, confirms and checks payouts; 0 turns it off (tests drive it). */
    PAYOUT_SEND_INTERVAL_MS: z.coerce.number().int().min(0).default(2_000),
    /** How long a control plane holds a payout it works on; another replica takes it over only after this (a crashed one's included). */
    PAYOUT_LEASE_S: z.coerce.number().int().min(1).default(30),
    /** A log stream whose client takes none of what was written for this long is closed (the client resumes with Last-Event-ID). */
    LOG_STREAM_STALL_MS: z.coerce.number().int().min(100).default(30_000),
    /** The built web console (apps/console/dist) served under /app/; unset: the one beside the sources, or a release's console/. */
    CONSOLE_DIR: z.string().default(""),
    LOG_LEVEL: z.enum(["debug", "info", "warn", "error", "silent"]).default("info"),
  })
  .superRefine((config, ctx) => {
    const shared = config.PUBLIC_DOMAIN && sharedCookieScope(config.PUBLIC_DOMAIN, config.GATEWAY_DOMAIN);
    if (shared) {
      ctx.addIssue({
        code: "custom",
        path: ["GATEWAY_DOMAIN"],
        message: `endpoints under ${config.GATEWAY_DOMAIN} and the API at ${config.PUBLIC_DOMAIN} share the registrable domain ${shared}, so a tenant's page could set cookies the API receives; put the endpoints on a domain of their own (see the README, "Public endpoints")`,
      });
    }
  });

export type Config = z.infer<typeof ConfigSchema>;

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join("\n")}`);
  }
  return parsed.data;
}

/**
 * loadConfig for a program's entry point: a configuration mistake is the
 * operator's to fix, so it is printed as such (no stack) and the process exits
 * 78 (EX_CONFIG), which systemd and the agent's installer know not to retry.
 */
export function loadConfigOrExit(program: string, env: Record<string, string | undefined> = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    process.stderr.write(`${program}: ${(error as Error).message}\n`);
    process.exit(78);
  }
}

/** A config for tests and tools: the defaults with overrides, never the process environment. */
export function testConfig(overrides: Partial<Config> = {}): Config {
  return { ...ConfigSchema.parse({}), PORT: 0, DATABASE_URL: "file::memory:", ...overrides };
}
