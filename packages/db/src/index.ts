import { createDb, type DbHandle } from "./client";
import { createAgentSessionsRepo } from "./repos/agent-sessions";
import { createAuthRepo } from "./repos/auth";
import { createBillingRepo } from "./repos/billing";
import { createDeploymentsRepo } from "./repos/deployments";
import { createDepositsRepo } from "./repos/deposits";
import { createEarningsRepo } from "./repos/earnings";
import { createLedgerRepo } from "./repos/ledger";
import { createLogIngest } from "./repos/log-ingest";
import { createLogsRepo } from "./repos/logs";
import { createNodesRepo } from "./repos/nodes";
import { createPayoutsRepo } from "./repos/payouts";
import { createRegistryCredentialsRepo } from "./repos/registry-credentials";
import { createTemplatesRepo } from "./repos/templates";

export { createDb, DatabaseNewerError, type DbHandle, type Dialect, isDatabaseUnavailable } from "./client";
export { createNotifier, NOTICE_MAX_BYTES, type Notifier, REPLICA_CHANNEL } from "./notifier";
export { DatabaseInUseError, databaseInUse, lockDatabase, lockFileFor, type ProcessLock } from "./process-lock";
export { type Release, RUNNABLE_FROM_KEY, type RunnableFrom, readJournal, readReleases, thisBuild } from "./releases";
export type { AgentSessionRow } from "./repos/agent-sessions";
export type { Consumption } from "./repos/billing";
export {
  heldDiskGb,
  type MoveFields,
  type NodeFree,
  type NodeHolding,
  nodeFree,
  type OccupyRefusal,
  OccupyRefused,
  type TransitionPatch,
} from "./repos/deployments";
export type { ConfirmOutcome } from "./repos/deposits";
export type { EarningsBooks, EarningsSummaryMicro, RefundOutcome } from "./repos/earnings";
export { type BalanceMicro, type LedgerTotals, type LedgerType, toBalance } from "./repos/ledger";
export type { StoredLogCursor } from "./repos/log-ingest";
export type { NewLogLine } from "./repos/logs";
export { type AgentPolicies, type NodeFilter, UPTIME_HOUR_MS, type UptimeWindows, uptimePercents } from "./repos/nodes";
export type { Attempt, NewPayout, PayoutBooks, RequestOutcome } from "./repos/payouts";
export type { NewRegistryCredential } from "./repos/registry-credentials";
export * from "./types";

/** Every repository over one database handle: what the rest of the system sees of storage. */
export function createRepos(h: DbHandle) {
  return {
    handle: h,
    auth: createAuthRepo(h),
    nodes: createNodesRepo(h),
    templates: createTemplatesRepo(h),
    deployments: createDeploymentsRepo(h),
    ledger: createLedgerRepo(h),
    logs: createLogsRepo(h),
    logIngest: createLogIngest(h),
    billing: createBillingRepo(h),
    deposits: createDepositsRepo(h),
    earnings: createEarningsRepo(h),
    payouts: createPayoutsRepo(h),
    registryCredentials: createRegistryCredentialsRepo(h),
    agentSessions: createAgentSessionsRepo(h),
  };
}
export type Repos = ReturnType<typeof createRepos>;

export async function openRepos(url: string): Promise<Repos> {
  return createRepos(await createDb(url));
}
