import {
  type ApiKeyScope,
  CPU_LIMITS,
  DEPLOYMENT_STATUSES,
  DESIRED_STATES,
  EARNING_TYPES,
  EGRESS_POLICIES,
  NODE_STATUSES,
  PAYOUT_STATUSES,
  RESTART_POLICIES,
  TRANSACTION_TYPES,
} from "@cm/protocol";
import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { DEPOSIT_STATUSES, EARNING_ACCOUNTS, type Gpu, type NodeSpecs, type StoredEndpoint, type TemplatePort } from "../types";

// Kept column-for-column in step with pg.ts: drizzle has no dialect-neutral schema.
// Times are epoch milliseconds (UTC by construction); money is integer micro-credits.

export const users = sqliteTable("users", {
  id: text("id").primaryKey(),
  walletAddress: text("wallet_address").notNull().unique(),
  isOperator: integer("is_operator", { mode: "boolean" }).notNull().default(false),
  balanceMicro: integer("balance_micro").notNull().default(0),
  reservedMicro: integer("reserved_micro").notNull().default(0),
  totalUsedMicro: integer("total_used_micro").notNull().default(0),
  ledgerSeq: integer("ledger_seq").notNull().default(0),
  createdAt: integer("created_at").notNull(),
});

export const authNonces = sqliteTable(
  "auth_nonces",
  {
    nonce: text("nonce").primaryKey(),
    walletAddress: text("wallet_address").notNull(),
    message: text("message").notNull(),
    expiresAt: integer("expires_at").notNull(),
    usedAt: integer("used_at"),
  },
  (t) => [index("auth_nonces_wallet_idx").on(t.walletAddress)],
);

export const sessions = sqliteTable(
  "sessions",
  {
    tokenHash: text("token_hash").primaryKey(),
    kind: text("kind", { enum: ["access", "refresh"] }).notNull(),
    userId: text("user_id").notNull(),
    familyId: text("family_id").notNull(),
    expiresAt: integer("expires_at").notNull(),
    usedAt: integer("used_at"),
    revokedAt: integer("revoked_at"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("sessions_family_idx").on(t.familyId)],
);

/**
 * API keys for scripts: a random secret shown once, stored only as its SHA-256
 * (a key is 32 random bytes, not a password a person chose, so a slow hash
 * such as bcrypt would add nothing against guessing and cost every request).
 */
export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    name: text("name").notNull(),
    /** The key's first characters (`cmk_` and 8 more): enough to tell keys apart, far too few to use. */
    prefix: text("prefix").notNull(),
    keyHash: text("key_hash").notNull().unique(),
    scopes: text("scopes", { mode: "json" }).notNull().$type<ApiKeyScope[]>(),
    createdAt: integer("created_at").notNull(),
    lastUsedAt: integer("last_used_at"),
    /** null: until deleted. */
    expiresAt: integer("expires_at"),
  },
  (t) => [index("api_keys_user_idx").on(t.userId, t.createdAt)],
);

export const nodes = sqliteTable(
  "nodes",
  {
    id: text("id").primaryKey(),
    operatorId: text("operator_id").notNull(),
    name: text("name").notNull(),
    region: text("region").notNull(),
    country: text("country").notNull(),
    hourlyRateCents: integer("hourly_rate_cents").notNull(),
    maxDeployments: integer("max_deployments").notNull(),
    status: text("status", { enum: NODE_STATUSES }).notNull(),
    agentTokenHash: text("agent_token_hash").notNull().unique(),
    specs: text("specs", { mode: "json" }).notNull().$type<NodeSpecs>(),
    gpus: text("gpus", { mode: "json" }).notNull().$type<Gpu[]>(),
    // Denormalised from specs/gpus so the catalogue filters run on indexes.
    gpuCount: integer("gpu_count").notNull().default(0),
    maxGpuVramMb: integer("max_gpu_vram_mb").notNull().default(0),
    cpuCores: integer("cpu_cores").notNull().default(0),
    ramMb: integer("ram_mb").notNull().default(0),
    activeDeployments: integer("active_deployments").notNull().default(0),
    // What the node's live deployments hold, kept beside activeDeployments by the same occupy/vacate:
    // a new deployment fits while each stays within gpuCount, cpuCores (as millicores) and ramMb.
    usedGpus: integer("used_gpus").notNull().default(0),
    usedCpuMillicores: integer("used_cpu_millicores").notNull().default(0),
    usedMemoryMb: integer("used_memory_mb").notNull().default(0),
    usedDiskGb: integer("used_disk_gb").notNull().default(0),
    // As the agent last said in its specs; null until it has (an older agent never does).
    egressPolicy: text("egress_policy", { enum: EGRESS_POLICIES }),
    diskDefaultGb: integer("disk_default_gb"),
    // What the agent said at its last hello (its package version); null until one has.
    agentVersion: text("agent_version"),
    lastHeartbeat: integer("last_heartbeat"),
    // Set by the operator (POST /operator/nodes/{id}/maintenance): non-null puts the node in maintenance,
    // whatever its heartbeats say; the reason is what tenants are shown.
    maintenanceReason: text("maintenance_reason"),
    maintenanceSince: integer("maintenance_since"),
    createdAt: integer("created_at").notNull(),
    retiredAt: integer("retired_at"),
  },
  (t) => [
    // The catalogue is listed newest first: this index lets a page stop after `limit` rows.
    index("nodes_created_idx").on(t.createdAt, t.id),
    index("nodes_status_idx").on(t.status, t.createdAt),
    index("nodes_operator_idx").on(t.operatorId),
    index("nodes_region_idx").on(t.region),
  ],
);

export const templates = sqliteTable("templates", {
  id: text("id").primaryKey(),
  slug: text("slug").notNull().unique(),
  name: text("name").notNull(),
  description: text("description").notNull(),
  category: text("category").notNull(),
  requiresGpu: integer("requires_gpu", { mode: "boolean" }).notNull(),
  minGpuVramMb: integer("min_gpu_vram_mb").notNull(),
  containerImage: text("container_image").notNull(),
  defaultEnv: text("default_env", { mode: "json" }).notNull().$type<Record<string, string>>(),
  ports: text("ports", { mode: "json" }).notNull().$type<TemplatePort[]>(),
  minCpuCores: integer("min_cpu_cores").notNull(),
  minRamMb: integer("min_ram_mb").notNull(),
  minDiskGb: integer("min_disk_gb").notNull(),
  estimatedPullTimeS: integer("estimated_pull_time_s").notNull(),
  sortOrder: integer("sort_order").notNull(),
});

export const deployments = sqliteTable(
  "deployments",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    nodeId: text("node_id").notNull(),
    templateId: text("template_id"),
    name: text("name"),
    image: text("image").notNull(),
    status: text("status", { enum: DEPLOYMENT_STATUSES }).notNull(),
    desiredState: text("desired_state", { enum: DESIRED_STATES }).notNull(),
    statusReason: text("status_reason"),
    exitCode: integer("exit_code"),
    env: text("env", { mode: "json" }).notNull().$type<Record<string, string>>(),
    ports: text("ports", { mode: "json" }).notNull().$type<number[]>(),
    // The tenant's argv for the container; null: the image's CMD / ENTRYPOINT.
    command: text("command", { mode: "json" }).$type<string[]>(),
    entrypoint: text("entrypoint", { mode: "json" }).$type<string[]>(),
    restartPolicy: text("restart_policy", { enum: RESTART_POLICIES }).notNull().default("no"),
    maxRestarts: integer("max_restarts").notNull().default(0),
    // Restarts since the last start by the tenant (or creation): on-failure stops restarting at maxRestarts.
    restartCount: integer("restart_count").notNull().default(0),
    // Raw TCP ports reached through the control plane (cm port-forward), beside the HTTP `ports`.
    tcpPorts: text("tcp_ports", { mode: "json" }).notNull().default([]).$type<number[]>(),
    // The tenant's stored registry credential the agent pulls the image with; null: a public or local image.
    registryCredentialId: text("registry_credential_id"),
    endpoints: text("endpoints", { mode: "json" }).notNull().$type<StoredEndpoint[]>(),
    hourlyRateCents: integer("hourly_rate_cents").notNull(),
    // What it holds on its node while live (0 on rows older than per-GPU scheduling: they held nothing counted).
    gpuCount: integer("gpu_count").notNull().default(0),
    cpuMillicores: integer("cpu_millicores").notNull().default(0),
    // quota: Docker caps the container at cpuMillicores (the tenant asked for them); weight: they are its CPU weight
    // alone (a default). Rows older than this column were all capped, which of them the tenant asked for unrecorded.
    cpuLimit: text("cpu_limit", { enum: CPU_LIMITS }).notNull().default("quota"),
    memoryMb: integer("memory_mb").notNull().default(0),
    // null: its template's minDiskGb, or the node's default for a custom image.
    diskGb: integer("disk_gb"),
    totalCostMicro: integer("total_cost_micro").notNull().default(0),
    reservedMicro: integer("reserved_micro").notNull().default(0),
    billedUntil: integer("billed_until"),
    // Running time charged so far, over every run: the cost is derived from it, so rounding never drifts.
    billedMs: integer("billed_ms").notNull().default(0),
    runSeq: integer("run_seq").notNull().default(0),
    createdAt: integer("created_at").notNull(),
    startedAt: integer("started_at"),
    stoppedAt: integer("stopped_at"),
    updatedAt: integer("updated_at").notNull(),
    deletedAt: integer("deleted_at"),
    // When the agent confirmed a deleted deployment gone from the node: from then on it is no longer in the node's sync.
    /** Lowercase and unguessable: each exposed port's public host is `<endpointKey>-<port>.<GATEWAY_DOMAIN>`. */
    endpointKey: text("endpoint_key").unique(),
    removedFromNodeAt: integer("removed_from_node_at"),
  },
  (t) => [
    index("deployments_user_idx").on(t.userId, t.createdAt),
    index("deployments_node_idx").on(t.nodeId, t.status),
    // The meter walks the running deployments every minute.
    index("deployments_status_idx").on(t.status),
  ],
);

export const creditTransactions = sqliteTable(
  "credit_transactions",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    type: text("type", { enum: TRANSACTION_TYPES }).notNull(),
    amountMicro: integer("amount_micro").notNull(),
    balanceAfterMicro: integer("balance_after_micro").notNull(),
    description: text("description").notNull(),
    txSignature: text("tx_signature").unique(),
    deploymentId: text("deployment_id"),
    depositId: text("deposit_id"),
    createdAt: integer("created_at").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [index("credit_tx_user_idx").on(t.userId, t.seq), index("credit_tx_dep_idx").on(t.deploymentId)],
);

/**
 * Where every usage charge goes, append-only: one row for the node's operator
 * (the charge less the platform's fee) and one for the fee, each pointing at the
 * tenant's ledger row it comes from; a refund takes back with negative rows
 * pointing at the tenant's refund row. So usage - refunds = the sum of these rows.
 */
export const operatorEarnings = sqliteTable(
  "operator_earnings",
  {
    id: text("id").primaryKey(),
    account: text("account", { enum: EARNING_ACCOUNTS }).notNull(),
    type: text("type", { enum: EARNING_TYPES }).notNull(),
    // The node's operator, on the platform's rows too: whose machine the money came through.
    operatorId: text("operator_id").notNull(),
    nodeId: text("node_id").notNull(),
    deploymentId: text("deployment_id").notNull(),
    creditTransactionId: text("credit_transaction_id").notNull(),
    amountMicro: integer("amount_micro").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    index("operator_earnings_operator_idx").on(t.operatorId, t.createdAt),
    index("operator_earnings_dep_idx").on(t.deploymentId),
    index("operator_earnings_txn_idx").on(t.creditTransactionId),
  ],
);

export const creditPackages = sqliteTable("credit_packages", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  credits: integer("credits").notNull(),
  bonusPercent: integer("bonus_percent").notNull(),
  priceUsdCents: integer("price_usd_cents").notNull(),
  sortOrder: integer("sort_order").notNull(),
});

export const deposits = sqliteTable(
  "deposits",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    packageId: text("package_id").notNull(),
    walletAddress: text("wallet_address").notNull(),
    amountStableBase: integer("amount_stable_base").notNull(),
    stableDecimals: integer("stable_decimals").notNull(),
    creditsMicro: integer("credits_micro").notNull(),
    treasuryWallet: text("treasury_wallet").notNull(),
    stableMint: text("stable_mint").notNull(),
    status: text("status", { enum: DEPOSIT_STATUSES }).notNull(),
    txSignature: text("tx_signature").unique(),
    transactionId: text("transaction_id"),
    /** The Solana Pay reference a payment names, by which the watcher finds it; null on deposits made before references. */
    reference: text("reference").unique(),
    expiresAt: integer("expires_at").notNull(),
    createdAt: integer("created_at").notNull(),
    confirmedAt: integer("confirmed_at"),
    /** The last payment found for it and refused (e.g. PAYMENT_AFTER_EXPIRY): its code and transaction, so the deposit can say why it was not credited. */
    refusalCode: text("refusal_code"),
    refusalSignature: text("refusal_signature"),
  },
  (t) => [index("deposits_user_idx").on(t.userId), index("deposits_open_idx").on(t.status, t.expiresAt)],
);

/**
 * Operators' withdrawals in USDC. A row holds the signed transaction of its
 * current attempt (signature, bytes, last valid block height) before anything
 * is sent, so whoever picks it up after a crash asks the chain about that
 * signature and builds a new transaction only once its blockhash has expired
 * without it landing: never two transfers, never a lost one.
 */
export const payouts = sqliteTable(
  "payouts",
  {
    id: text("id").primaryKey(),
    operatorId: text("operator_id").notNull(),
    amountMicro: integer("amount_micro").notNull(),
    /** The same amount in the stablecoin's base units, fixed at request time. */
    amountStableBase: integer("amount_stable_base").notNull(),
    stableMint: text("stable_mint").notNull(),
    stableDecimals: integer("stable_decimals").notNull(),
    /** The operator's wallet: the one they sign in with. */
    walletAddress: text("wallet_address").notNull(),
    status: text("status", { enum: PAYOUT_STATUSES }).notNull(),
    /** Set when an administrator (PAYOUTS=manual) or the daily limit (PAYOUTS=auto) lets it be sent. */
    approvedAt: integer("approved_at"),
    attempt: integer("attempt").notNull(),
    signature: text("signature").unique(),
    /** base64 of the signed transaction, sent again as is while its blockhash is valid. */
    signedTx: text("signed_tx"),
    lastValidBlockHeight: integer("last_valid_block_height"),
    /** Signatures of earlier attempts, each seen expired without landing (space-separated, oldest first). */
    earlierSignatures: text("earlier_signatures").notNull(),
    /** Why it failed (status failed), or the last error while sending. */
    error: text("error"),
    /** Which control-plane process is sending it, until when: two never work on one payout at once. */
    leaseOwner: text("lease_owner"),
    leaseUntil: integer("lease_until"),
    requestedAt: integer("requested_at").notNull(),
    paidAt: integer("paid_at"),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [index("payouts_operator_idx").on(t.operatorId, t.requestedAt), index("payouts_status_idx").on(t.status)],
);

export const deploymentLogs = sqliteTable(
  "deployment_logs",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    deploymentId: text("deployment_id").notNull(),
    seq: integer("seq").notNull(),
    ts: text("ts").notNull(),
    tsMs: integer("ts_ms").notNull(),
    stream: text("stream").notNull(),
    message: text("message").notNull(),
  },
  (t) => [uniqueIndex("deployment_logs_seq_idx").on(t.deploymentId, t.seq), index("deployment_logs_ts_idx").on(t.deploymentId, t.tsMs)],
);

/**
 * A tenant's login to a private container registry. The password is sealed
 * (AES-256-GCM under the configured key) and only ever opened to go, inside one
 * start command, to the agent that pulls the image.
 */
export const registryCredentials = sqliteTable(
  "registry_credentials",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    /** The registry's host (and port), as image references name it: `ghcr.io`, `127.0.0.1:5000`. */
    registry: text("registry").notNull(),
    username: text("username").notNull(),
    /** base64 of iv | tag | ciphertext. */
    secretSealed: text("secret_sealed").notNull(),
    createdAt: integer("created_at").notNull(),
    lastUsedAt: integer("last_used_at"),
  },
  (t) => [index("registry_credentials_user_idx").on(t.userId, t.createdAt)],
);

/** Seconds each node was heard from, per clock hour: uptime over 24 h, 7 d and 30 d is summed from these. */
export const nodeUptimeHours = sqliteTable(
  "node_uptime_hours",
  {
    nodeId: text("node_id").notNull(),
    /** Epoch hour: floor(ms / 3,600,000). */
    hour: integer("hour").notNull(),
    onlineMs: integer("online_ms").notNull().default(0),
  },
  (t) => [uniqueIndex("node_uptime_hours_pk").on(t.nodeId, t.hour)],
);

export const settings = sqliteTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
});

/** See schema/pg.ts. */
export const agentSessions = sqliteTable("agent_sessions", {
  nodeId: text("node_id").primaryKey(),
  replicaId: text("replica_id").notNull(),
  address: text("address"),
  since: integer("since").notNull(),
});
