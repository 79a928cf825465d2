import { createDb, type DbHandle } from "./client";
import { createAuthRepo } from "./repos/auth";
import { createNodesRepo } from "./repos/nodes";
import { createTemplatesRepo } from "./repos/templates";
import { createDeploymentsRepo } from "./repos/deployments";
import { createLedgerRepo } from "./repos/ledger";
import { createLogsRepo } from "./repos/logs";
import { createLogIngest } from "./repos/log-ingest";
import { createBillingRepo } from "./repos/billing";
import { createDepositsRepo } from "./repos/deposits";

export * from "./types";
export { createDb, isDatabaseUnavailable, type DbHandle, type Dialect } from "./client";
export { uptimePercent, type NodeFilter } from "./repos/nodes";
export { toBalance, type BalanceMicro, type LedgerType } from "./repos/ledger";
export { OccupyRefused, type OccupyRefusal, type TransitionPatch, type MoveFields } from "./repos/deployments";
export type { NewLogLine } from "./repos/logs";
export type { StoredLogCursor } from "./repos/log-ingest";
export type { Consumption } from "./repos/billing";
export type { ConfirmOutcome } from "./repos/deposits";

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
  };
}
export type Repos = ReturnType<typeof createRepos>;

export async function openRepos(url: string): Promise<Repos> {
  return createRepos(await createDb(url));
}
