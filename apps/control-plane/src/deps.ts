import { openRepos, type Repos } from "@cm/db";
import type { Config } from "./config";
import { TEMPLATE_SEED } from "./catalog/templates";
import { createAuthService, type AuthService } from "./services/auth-service";
import { createDeploymentService, type DeploymentService, type NodeLink } from "./services/deployment-service";
import { EventBus } from "./services/events";
import { randomId, systemClock, type Clock, type IdGenerator } from "./services/ids";
import { createLogger, type Logger } from "./services/logger";
import { CREDIT_PACKAGE_SEED } from "./catalog/credit-packages";
import type { ChainClient } from "./services/chain/chain-client";
import { createWeb3ChainClient } from "./services/chain/web3-chain-client";
import { createDepositService, type DepositService } from "./services/deposit-service";
import { ResponseCache } from "./services/response-cache";

export type Deps = {
  config: Config;
  repos: Repos;
  clock: Clock;
  ids: IdGenerator;
  log: Logger;
  events: EventBus;
  auth: AuthService;
  deployments: DeploymentService;
  depositService: DepositService;
  link: NodeLink;
  nodeCatalogCache: ResponseCache;
  /** Where endpoint URLs point; the port is learned once the listener is bound. */
  gateway(): { domain: string; localPort?: number };
  setListenPort(port: number): void;
  close(): Promise<void>;
};

export type DepsOverrides = Partial<Pick<Deps, "clock" | "ids" | "log" | "link">> & { chain?: ChainClient };

/** The one place that builds everything. Tests pass their own clock or link. */
export async function createDeps(config: Config, o: DepsOverrides = {}): Promise<Deps> {
  const clock = o.clock ?? systemClock;
  const ids = o.ids ?? randomId;
  const log = o.log ?? createLogger(config.LOG_LEVEL);
  const repos = await openRepos(config.DATABASE_URL);
  await repos.templates.seed(TEMPLATE_SEED);
  await repos.deposits.seedPackages(CREDIT_PACKAGE_SEED);
  const chain = o.chain ?? createWeb3ChainClient({ rpcUrl: config.SOLANA_RPC_URL, commitment: config.SOLANA_COMMITMENT });
  const events = new EventBus();
  const link: NodeLink = o.link ?? { isConnected: () => false };
  let listenPort: number | undefined;
  const nodeCatalogCache = new ResponseCache({ ttlMs: 1000, maxEntries: 1000, now: () => clock.now() });
  for (const e of ["node-changed", "node-retired", "deployment-changed"] as const) events.on(e, () => nodeCatalogCache.clear());
  const domain = config.PUBLIC_DOMAIN ?? `${config.HOST}:${config.PORT}`;
  return {
    config, repos, clock, ids, log, events, link, nodeCatalogCache,
    auth: createAuthService(repos, clock, ids, { domain, nonceTtlS: config.NONCE_TTL_S, accessTtlS: config.ACCESS_TOKEN_TTL_S, refreshTtlS: config.REFRESH_TOKEN_TTL_S }),
    deployments: createDeploymentService(repos, clock, ids, events, { isConnected: (id) => link.isConnected(id) }),
    depositService: createDepositService(repos, chain, clock, ids, {
      treasuryWallet: config.TREASURY_WALLET, stableMint: config.STABLE_MINT, stableDecimals: config.STABLE_DECIMALS, depositTtlS: config.DEPOSIT_TTL_S,
    }),
    gateway: () => ({ domain: config.GATEWAY_DOMAIN, ...(listenPort !== undefined ? { localPort: listenPort } : {}) }),
    setListenPort: (p) => { listenPort = p; },
    close: () => repos.handle.close(),
  };
}
