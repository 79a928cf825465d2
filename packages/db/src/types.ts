import type { EgressPolicy, Gpu, NodeSpecs } from "@cm/protocol";
import type * as pg from "./schema/pg";

export type { EgressPolicy, Gpu, NodeSpecs };
export type TemplatePort = { internal: number; protocol: string; description: string };
/** An exposed port's readiness as the agent last probed it; the URL is derived at read time. */
export type StoredEndpoint = { internalPort: number; ready: boolean };
/** A deposit waits for its transfer on chain, then is credited once; the API never shows this word. */
export const DEPOSIT_STATUSES = ["pending", "confirmed"] as const;
/** Whose an earnings row is: the node's operator's, or the platform's fee. */
export const EARNING_ACCOUNTS = ["operator", "platform"] as const;

export type UserRow = typeof pg.users.$inferSelect;
export type NodeRow = typeof pg.nodes.$inferSelect;
export type TemplateRow = typeof pg.templates.$inferSelect;
export type DeploymentRow = typeof pg.deployments.$inferSelect;
export type CreditTransactionRow = typeof pg.creditTransactions.$inferSelect;
export type CreditPackageRow = typeof pg.creditPackages.$inferSelect;
export type DepositRow = typeof pg.deposits.$inferSelect;
export type LogRow = typeof pg.deploymentLogs.$inferSelect;
export type EarningRow = typeof pg.operatorEarnings.$inferSelect;
export type PayoutRow = typeof pg.payouts.$inferSelect;
export type RegistryCredentialRow = typeof pg.registryCredentials.$inferSelect;
export type ApiKeyRow = typeof pg.apiKeys.$inferSelect;

/** 1 credit = 1 US cent = 1,000,000 micro-credits: fine enough to charge per second. */
export const MICRO_PER_CREDIT = 1_000_000;
export const creditsToMicro = (credits: number) => Math.round(credits * MICRO_PER_CREDIT);
export const microToCredits = (micro: number) => micro / MICRO_PER_CREDIT;
