import { createNotifier, creditsToMicro, openRepos, type Repos } from "@cm/db";
import { countPoolUse, type PoolUse } from "@cm/db/pool-use";
import { AgentHub } from "./agents/agent-hub";
import { ArchiveReads } from "./agents/archive-reads";
import { CommandWakes } from "./agents/command-wakes";
import { ExecBroker } from "./agents/exec-broker";
import { fleetTunnels, ReplicaHop, reachable } from "./agents/replica-hop";
import { TcpForwarder } from "./agents/tcp-forwarder";
import { TunnelBroker } from "./agents/tunnel-broker";
import { CREDIT_PACKAGE_SEED } from "./catalog/credit-packages";
import { TEMPLATE_SEED } from "./catalog/templates";
import type { Config } from "./config";
import { createGateway, type Gateway } from "./gateway/proxy";
import { createEndpointResolver } from "./gateway/resolver";
import { type AuthService, createAuthService } from "./services/auth-service";
import type { ChainClient } from "./services/chain/chain-client";
import type { PayoutChain } from "./services/chain/payout-chain";
import { createWeb3ChainClient } from "./services/chain/web3-chain-client";
import { createWeb3PayoutChain } from "./services/chain/web3-payout-chain";
import { createCharges } from "./services/charges";
import { DatabaseHealth } from "./services/database-health";
import { createDeploymentMoves } from "./services/deployment-moves";
import { createDeploymentService, type DeploymentService, type NodeLink } from "./services/deployment-service";
import { DeploymentWatch } from "./services/deployment-watch";
import { createDepositService, type DepositService } from "./services/deposit-service";
import { createDepositWatcher, type DepositWatcher } from "./services/deposit-watcher";
import { createEarningsService, type EarningsService } from "./services/earnings";
import { EventBus } from "./services/events";
import { GrantWatch } from "./services/grant-watch";
import { type Clock, type IdGenerator, randomId, systemClock } from "./services/ids";
import { createLogger, type Logger } from "./services/logger";
import { createMetering, type Liveness, type Metering } from "./services/metering";
import { createOperatorService, type OperatorService } from "./services/operator-service";
import { loadPayoutKeypair } from "./services/payout-keypair";
import { createPayoutSender, type PayoutSender } from "./services/payout-sender";
import { createPayoutService, type PayoutService } from "./services/payout-service";
import { PeriodicWork } from "./services/periodic-work";
import { createRegistryCredentials, type RegistryCredentials } from "./services/registry-credentials";
import { createRegistrySecrets, resolveRegistryKey } from "./services/registry-secrets";
import { ReplicaBus } from "./services/replica-bus";
import { ResponseCache } from "./services/response-cache";
import { StreamHolds } from "./services/stream-holds";

export type Deps = {
  config: Config;
  repos: Repos;
  clock: Clock;
  ids: IdGenerator;
  log: Logger;
  events: EventBus;
  /** Which periodic work this process runs, and its turns (/metrics). */
  periodic: PeriodicWork;
  /** Commands' time from their move to the agent, on this replica (/metrics). */
  commandWakes: CommandWakes;
  /** The database pool's size and the calls under way (/metrics). */
  poolUse: PoolUse;
  /** The notices' crossing to other replicas; undefined on the embedded database (one process). */
  replicas: ReplicaBus | undefined;
  /** Requests carried to the replica holding a node's agent session; undefined on the embedded database. */
  hop: ReplicaHop | undefined;
  /** Whether the node's agent is connected here or to a replica requests are carried to. */
  reachable(nodeId: string): Promise<boolean>;
  /** What the streams follow: a deployment's changes and its stored log lines. */
  watch: DeploymentWatch;
  auth: AuthService;
  /** Ends streams and exec sessions when the sign-in that opened them is over. */
  grants: GrantWatch;
  /** The caps on open streams, and their slots. */
  streams: StreamHolds;
  deployments: DeploymentService;
  depositService: DepositService;
  /** Credits deposits paid by reference without a confirm call. */
  depositWatcher: DepositWatcher;
  /** The nodes an account operates: enrolment, listing, retirement. */
  operator: OperatorService;
  /** What operators' nodes earned, read for GET /operator/earnings. */
  earnings: EarningsService;
  /** Operators' withdrawals: requests and their states. */
  payouts: PayoutService;
  /** Tenants' registry logins, sealed at rest. */
  registryCredentials: RegistryCredentials;
  /** Sends approved payouts in USDC, exactly once; absent without PAYOUT_KEYPAIR. */
  payoutSender: PayoutSender | undefined;
  link: NodeLink;
  /** Every agent connection; also the NodeLink unless a test passes its own. */
  agents: AgentHub;
  tunnels: TunnelBroker;
  /** `cm exec` sessions, relayed through the node's agent as tunnels are. */
  execs: ExecBroker;
  /** Tenants' raw TCP connections to their containers (cm port-forward), over the tunnels. */
  tcp: TcpForwarder;
  /** Tenants' reads of their containers' files (cm cp out), running or not, over the tunnels. */
  archives: ArchiveReads;
  /** The public-endpoint proxy: requests whose Host is `<label>.<GATEWAY_DOMAIN>`. */
  endpoints: Gateway;
  metering: Metering;
  /** Whether the database answers: GET /ready, and 503 at once for API calls while it does not. */
  dbHealth: DatabaseHealth;
  nodeCatalogCache: ResponseCache;
  /** Where endpoint URLs point; the port is learned once the listener is bound. */
  gateway(): { domain: string; localPort?: number };
  setListenPort(port: number): void;
  close(): Promise<void>;
};

export type DepsOverrides = Partial<Pick<Deps, "clock" | "ids" | "log" | "link">> & {
  chain?: ChainClient;
  payoutChain?: PayoutChain;
  /** No timers: the test drives the heartbeat monitor and the meter with their tick(). */
  manualTicks?: boolean;
};

/** Transfers built for one payout, each seen expired without landing, before it fails and its amount is available again. */
const PAYOUT_MAX_ATTEMPTS = 5;

/** How often the database is asked whether it answers while it does not (and every few times that while it does). */
const DATABASE_PROBE_MS = 500;

/** The one place that builds everything. Tests pass their own clock or link. */
export async function createDeps(config: Config, o: DepsOverrides = {}): Promise<Deps> {
  const clock = o.clock ?? systemClock;
  // Every periodic job runs on the one clock, counted per job for /metrics.
  const periodic = new PeriodicWork(clock);
  const commandWakes = new CommandWakes();
  const ids = o.ids ?? randomId;
  const log = o.log ?? createLogger(config.LOG_LEVEL);
  const repos = await openRepos(config.DATABASE_URL);
  const poolUse = countPoolUse(repos.handle);
  await repos.templates.seed(TEMPLATE_SEED);
  await repos.deposits.seedPackages(CREDIT_PACKAGE_SEED);
  // Read before anything listens: a key file others can read stops the start, as PAYOUT_KEYPAIR's does.
  const registryKey = resolveRegistryKey(config.REGISTRY_CREDENTIALS_KEY, config.DATABASE_URL);
  if (!registryKey)
    log.warn(
      "REGISTRY_CREDENTIALS_KEY is not set: tenants cannot store registry credentials on this PostgreSQL installation until it is (the same key on every replica)",
    );
  const registryCredentials = createRegistryCredentials({ repos, clock, ids, log, secrets: registryKey && createRegistrySecrets(registryKey) });
  const chain = o.chain ?? createWeb3ChainClient({ rpcUrl: config.SOLANA_RPC_URL, commitment: config.SOLANA_COMMITMENT });
  const events = new EventBus();
  // Several replicas may share a PostgreSQL database: their notices cross over LISTEN/NOTIFY (replica-bus.ts).
  const notifier = createNotifier(config.DATABASE_URL);
  const replicas = notifier && new ReplicaBus({ notifier, events, repos, log, replicaId: ids("replica") });
  await replicas?.start();
  // What needs an agent session another replica holds is carried there (replica-hop.ts).
  const hop =
    replicas &&
    new ReplicaHop({
      repos,
      clock,
      log,
      replicaId: replicas.replicaId,
      address: config.REPLICA_ADDRESS,
      secret: config.REPLICA_SECRET,
      openTimeoutMs: config.TUNNEL_OPEN_TIMEOUT_MS,
    });
  if (replicas && Boolean(config.REPLICA_ADDRESS) !== Boolean(config.REPLICA_SECRET))
    log.warn("REPLICA_ADDRESS and REPLICA_SECRET go together: without both, requests that need an agent session another replica holds are not carried to it");
  // The meter and the moves ask the link only once running, by which time the hub below exists.
  const liveness: Liveness = {
    isConnected: (id) => link.isConnected(id),
    billableUntilMs: (id) => agents.billableUntilMs(id),
    settledThroughMs: (id, nowMs) => agents.settledThroughMs(id, nowMs),
    lastProofOfLifeMs: (id) => agents.lastProofOfLifeMs(id),
  };
  const charges = createCharges({ repos, ids, feePercent: config.PLATFORM_FEE_PERCENT });
  const moves = createDeploymentMoves({ repos, charges, link: liveness });
  const metering = createMetering({
    repos,
    clock: periodic.clockFor("metering"),
    events,
    log,
    link: liveness,
    charges,
    moves,
    intervalMs: config.METER_INTERVAL_MS,
  });
  const dbHealth = new DatabaseHealth({ ping: (timeoutMs) => repos.handle.ping(timeoutMs), log, probeMs: DATABASE_PROBE_MS });
  const agents = new AgentHub({
    repos,
    clock,
    periodic,
    commandWakes,
    ids,
    events,
    log,
    metering,
    moves,
    dbHealth,
    heartbeatIntervalMs: config.HEARTBEAT_INTERVAL_MS,
    heartbeatFlushMs: config.HEARTBEAT_FLUSH_MS,
    nodeLostAfterMs: config.NODE_LOST_AFTER_S * 1000,
    lostRetentionMs: config.LOST_RETENTION_S * 1000,
    helloTimeoutMs: config.AGENT_HELLO_TIMEOUT_MS,
    maxFrameBytes: config.AGENT_MAX_FRAME_BYTES,
    logIngestBytesPerS: config.LOG_INGEST_BYTES_PER_S,
    registryAuth: (id) => registryCredentials.authFor(id),
    ...(replicas ? { commandSweepMs: config.COMMAND_SWEEP_MS } : {}),
    ...(hop ? { sessionDirectory: hop } : {}),
  });
  const link: NodeLink = o.link ?? agents;
  const tunnels = new TunnelBroker({
    repos,
    events,
    sendTo: (id, f) => agents.sendTo(id, f),
    openTimeoutMs: config.TUNNEL_OPEN_TIMEOUT_MS,
    idleMs: config.GATEWAY_IDLE_TIMEOUT_MS,
  });
  const holdsHere = (nodeId: string) => agents.isConnected(nodeId);
  const fleet = fleetTunnels(tunnels, hop, holdsHere);
  hop?.setLocal(tunnels);
  const auth = createAuthService(repos, clock, ids, events, {
    domain: config.PUBLIC_DOMAIN ?? `${config.HOST}:${config.PORT}`,
    nonceTtlS: config.NONCE_TTL_S,
    accessTtlS: config.ACCESS_TOKEN_TTL_S,
    refreshTtlS: config.REFRESH_TOKEN_TTL_S,
  });
  const grants = new GrantWatch({ repos, events, clock: periodic.clockFor("revocation-check"), log, checkMs: config.REVOCATION_CHECK_MS });
  const execs = new ExecBroker({
    repos,
    events,
    sendTo: (id, f) => agents.sendTo(id, f),
    openTimeoutMs: config.TUNNEL_OPEN_TIMEOUT_MS,
    idleTimeoutMs: config.EXEC_IDLE_TIMEOUT_MS,
    grants,
    authenticate: (token) => auth.authenticateToken(token),
    log,
  });
  const tcp = new TcpForwarder({ events, grants, authenticate: (token) => auth.authenticateToken(token) });
  const endpoints = createGateway({
    domain: config.GATEWAY_DOMAIN,
    resolver: createEndpointResolver(repos, (id) => reachable(id, holdsHere, hop), { events, ttlMs: 1000, now: () => clock.now() }),
    dialer: fleet,
    timeouts: { responseMs: config.GATEWAY_RESPONSE_TIMEOUT_MS, idleMs: config.GATEWAY_IDLE_TIMEOUT_MS },
    log,
    secure: Boolean(config.TLS_CERT && config.TLS_KEY),
  });
  const depositWatcher = createDepositWatcher({
    repos,
    chain,
    clock: periodic.clockFor("deposit-watcher"),
    ids,
    log,
    treasuryWallet: config.TREASURY_WALLET,
    stableMint: config.STABLE_MINT,
    ttlS: config.DEPOSIT_TTL_S,
    graceS: config.DEPOSIT_GRACE_S,
    intervalMs: config.DEPOSIT_WATCH_INTERVAL_MS,
  });
  // Read before anything listens: a keypair others can read stops the start (the installer's and systemd's config-error exit).
  const payer = config.PAYOUT_KEYPAIR ? loadPayoutKeypair(config.PAYOUT_KEYPAIR) : undefined;
  const payoutSender =
    payer &&
    createPayoutSender({
      repos,
      chain: o.payoutChain ?? createWeb3PayoutChain({ rpcUrl: config.SOLANA_RPC_URL, commitment: config.SOLANA_COMMITMENT }),
      clock: periodic.clockFor("payouts"),
      log,
      payer,
      owner: ids("proc"),
      mode: config.PAYOUTS,
      dailyLimitMicro: creditsToMicro(config.PAYOUT_DAILY_LIMIT_CREDITS),
      intervalMs: o.manualTicks ? 0 : config.PAYOUT_SEND_INTERVAL_MS,
      leaseMs: config.PAYOUT_LEASE_S * 1000,
      maxAttempts: PAYOUT_MAX_ATTEMPTS,
    });
  const payouts = createPayoutService(
    repos,
    clock,
    ids,
    {
      enabled: payer !== undefined,
      mode: config.PAYOUTS,
      dailyLimitCredits: config.PAYOUT_DAILY_LIMIT_CREDITS,
      minCredits: config.PAYOUT_MIN_CREDITS,
      holdHours: config.EARNINGS_HOLD_HOURS,
      stableMint: config.STABLE_MINT,
      stableDecimals: config.STABLE_DECIMALS,
    },
    // Sent at once under PAYOUTS=auto, rather than at the next turn.
    () => void (config.PAYOUTS === "auto" && payoutSender?.tick().catch((err) => log.error("payout sender: a turn failed", { err }))),
  );
  if (!o.manualTicks) {
    dbHealth.start();
    agents.start();
    metering.start();
    depositWatcher.start();
    payoutSender?.start();
  }
  let listenPort: number | undefined;
  const nodeCatalogCache = new ResponseCache({ ttlMs: 1000, maxEntries: 1000, now: () => clock.now() });
  for (const e of ["node-changed", "node-retired", "deployment-changed"] as const) events.on(e, () => nodeCatalogCache.clear());
  return {
    config,
    repos,
    clock,
    ids,
    log,
    events,
    periodic,
    commandWakes,
    poolUse,
    replicas,
    watch: new DeploymentWatch({ repos, events, log, clock: periodic.clockFor("stream-fallback"), fallbackMs: config.STREAM_FALLBACK_MS }),
    link,
    agents,
    dbHealth,
    tunnels,
    execs,
    tcp,
    archives: new ArchiveReads({ tunnels: fleet, grants }),
    hop,
    reachable: (nodeId) => reachable(nodeId, holdsHere, hop),
    endpoints,
    metering,
    nodeCatalogCache,
    auth,
    grants,
    streams: new StreamHolds({ grants, limits: { perAccount: config.MAX_STREAMS_PER_ACCOUNT, perDeployment: config.MAX_STREAMS_PER_DEPLOYMENT } }),
    deployments: createDeploymentService({ repos, clock, ids, events, link, moves, registryCredentials }),
    depositService: createDepositService(repos, chain, clock, ids, {
      treasuryWallet: config.TREASURY_WALLET,
      stableMint: config.STABLE_MINT,
      stableDecimals: config.STABLE_DECIMALS,
      depositTtlS: config.DEPOSIT_TTL_S,
      depositGraceS: config.DEPOSIT_GRACE_S,
      maxOpenDeposits: config.MAX_OPEN_DEPOSITS,
    }),
    depositWatcher,
    operator: createOperatorService({ repos, clock, ids, events, maxNodesPerAccount: config.MAX_NODES_PER_ACCOUNT }),
    earnings: createEarningsService({ repos, clock, feePercent: config.PLATFORM_FEE_PERCENT, holdHours: config.EARNINGS_HOLD_HOURS }),
    payouts,
    payoutSender,
    registryCredentials,
    gateway: () => ({ domain: config.GATEWAY_DOMAIN, ...(listenPort !== undefined ? { localPort: listenPort } : {}) }),
    setListenPort: (p) => {
      listenPort = p;
    },
    close: async () => {
      dbHealth.stop();
      endpoints.close();
      tunnels.close();
      execs.close();
      tcp.close();
      grants.close();
      await agents.close();
      await metering.stop();
      await depositWatcher.stop();
      await payoutSender?.stop();
      await hop?.releaseAll().catch(() => undefined);
      await replicas?.close();
      await repos.handle.close();
    },
  };
}
