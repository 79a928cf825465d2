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
import { bigint, boolean, index, integer, jsonb, pgTable, serial, text, uniqueIndex } from "drizzle-orm/pg-core";
import { DEPOSIT_STATUSES, EARNING_ACCOUNTS, type Gpu, type NodeSpecs, type StoredEndpoint, type TemplatePort } from "../types";

// Kept column-for-column in step with sqlite.ts: drizzle has no dialect-neutral schema.
// Times are epoch milliseconds (UTC by construction); money is integer micro-credits.

export const users = pgTable("users", {
  id: text("id").primaryKey(),
  walletAddress: text("wallet_address").notNull().unique(),
  isOperator: boolean("is_operator").notNull().default(false),
  balanceMicro: bigint("balance_micro", { mode: "number" }).notNull().default(0),
  reservedMicro: bigint("reserved_micro", { mode: "number" }).notNull().default(0),
  totalUsedMicro: bigint("total_used_micro", { mode: "number" }).notNull().default(0),
  ledgerSeq: integer("ledger_seq").notNull().default(0),
  createdAt: bigint("created_at", { mode: "number" }).notNull(),
});

export const authNonces = pgTable(
  "auth_nonces",
  {
    nonce: text("nonce").primaryKey(),
    walletAddress: text("wallet_address").notNull(),
    message: text("message").notNull(),
    expiresAt: bigint("expires_at", { mode: "number" }).notNull(),
    usedAt: bigint("used_at", { mode: "number" }),
  },
  (t) => [index("auth_nonces_wallet_idx").on(t.walletAddress)],
);

export const sessions = pgTable(
  "sessions",
  {
    tokenHash: text("token_hash").primaryKey(),
    kind: text("kind", { enum: ["access", "refresh"] }).notNull(),
    userId: text("user_id").notNull(),
    familyId: text("family_id").notNull(),
    expiresAt: bigint("expires_at", { mode: "number" }).notNull(),
    usedAt: bigint("used_at", { mode: "number" }),
    revokedAt: bigint("revoked_at", { mode: "number" }),
    createdAt: bigint("created_at", { mode: "number" }).notNull(),
  },
  (t) => [index("sessions_family_idx").on(t.familyId)],
);

/**
 * API keys for scripts: a random secret shown once, stored only as its SHA-256
 * (a key is 32 random bytes, not a password a person chose, so a slow hash
 * such as bcrypt would add nothing against guessing and cost every request).
 */
export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    name: text("name").notNull(),
    /** The key's first characters (`cmk_` and 8 more): enough to tell keys apart, far too few to use. */
    prefix: text("prefix").notNull(),
    keyHash: text("key_hash").notNull().unique(),
    scopes: jsonb("scopes").notNull().$type<ApiKeyScope[]>(),
    createdAt: bigint("created_at", { mode: "number" }).notNull(),
    lastUsedAt: bigint("last_used_at", { mode: "number" }),
    /** null: until deleted. */
    expiresAt: bigint("expires_at", { mode: "number" }),
  },
  (t) => [index("api_keys_user_idx").on(t.userId, t.createdAt)],
);

export const nodes = pgTable(
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
    specs: jsonb("specs").notNull().$type<NodeSpecs>(),
    gpus: jsonb("gpus").notNull().$type<Gpu[]>(),
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
    lastHeartbeat: bigint("last_heartbeat", { mode: "number" }),
    // Set by the operator (POST /operator/nodes/{id}/maintenance): non-null puts the node in maintenance,
    // whatever its heartbeats say; the reason is what tenants are shown.
    maintenanceReason: text("maintenance_reason"),
    maintenanceSince: bigint("maintenance_since", { mode: "number" }),
    createdAt: bigint("created_at", { mode: "number" }).notNull(),
    retiredAt: bigint("retired_at", { mode: "number" }),
  },
  (t) => [
    // The catalogue is listed newest first: this index lets a page stop after `limit` rows.
    index("nodes_created_idx").on(t.createdAt, t.id),
    index("nodes_status_idx").on(t.status, t.createdAt),
    index("nodes_operator_idx").on(t.operatorId),
    index("nodes_region_idx").on(t.region),
  ],
);

export const templates = pgTable("templates", {
  id: text("id").primaryKey(),
  slug: text("slug").notNull().unique(),
  name: text("name").notNull(),
  description: text("description").notNull(),
  category: text("category").notNull(),
  requiresGpu: boolean("requires_gpu").notNull(),
  minGpuVramMb: integer("min_gpu_vram_mb").notNull(),
  containerImage: text("container_image").notNull(),
  defaultEnv: jsonb("default_env").notNull().$type<Record<string, string>>(),
  ports: jsonb("ports").notNull().$type<TemplatePort[]>(),
  minCpuCores: integer("min_cpu_cores").notNull(),
  minRamMb: integer("min_ram_mb").notNull(),
  minDiskGb: integer("min_disk_gb").notNull(),
  estimatedPullTimeS: integer("estimated_pull_time_s").notNull(),
  sortOrder: integer("sort_order").notNull(),
});

export const deployments = pgTable(
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
    env: jsonb("env").notNull().$type<Record<string, string>>(),
    ports: jsonb("ports").notNull().$type<number[]>(),
    // The tenant's argv for the container; null: the image's CMD / ENTRYPOINT.
    command: jsonb("command").$type<string[]>(),
    entrypoint: jsonb("entrypoint").$type<string[]>(),
    restartPolicy: text("restart_policy", { enum: RESTART_POLICIES }).notNull().default("no"),
    maxRestarts: integer("max_restarts").notNull().default(0),
    // Restarts since the last start by the tenant (or creation): on-failure stops restarting at maxRestarts.
    restartCount: integer("restart_count").notNull().default(0),
    // Raw TCP ports reached through the control plane (cm port-forward), beside the HTTP `ports`.
    tcpPorts: jsonb("tcp_ports").notNull().default([]).$type<number[]>(),
    // The tenant's stored registry credential the agent pulls the image with; null: a public or local image.
    registryCredentialId: text("registry_credential_id"),
    endpoints: jsonb("endpoints").notNull().$type<StoredEndpoint[]>(),
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
    totalCostMicro: bigint("total_cost_micro", { mode: "number" }).notNull().default(0),
    reservedMicro: bigint("reserved_micro", { mode: "number" }).notNull().default(0),
    billedUntil: bigint("billed_until", { mode: "number" }),
    // Running time charged so far, over every run: the cost is derived from it, so rounding never drifts.
    billedMs: bigint("billed_ms", { mode: "number" }).notNull().default(0),
    runSeq: integer("run_seq").notNull().default(0),
    createdAt: bigint("created_at", { mode: "number" }).notNull(),
    startedAt: bigint("started_at", { mode: "number" }),
    stoppedAt: bigint("stopped_at", { mode: "number" }),
    updatedAt: bigint("updated_at", { mode: "number" }).notNull(),
    deletedAt: bigint("deleted_at", { mode: "number" }),
    // When the agent confirmed a deleted deployment gone from the node: from then on it is no longer in the node's sync.
    /** Lowercase and unguessable: each exposed port's public host is `<endpointKey>-<port>.<GATEWAY_DOMAIN>`. */
    endpointKey: text("endpoint_key").unique(),
    removedFromNodeAt: bigint("removed_from_node_at", { mode: "number" }),
  },
  (t) => [
    index("deployments_user_idx").on(t.userId, t.createdAt),
    index("deployments_node_idx").on(t.nodeId, t.status),
    // The meter walks the running deployments every minute.
    index("deployments_status_idx").on(t.status),
  ],
);

export const creditTransactions = pgTable(
  "credit_transactions",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    type: text("type", { enum: TRANSACTION_TYPES }).notNull(),
    amountMicro: bigint("amount_micro", { mode: "number" }).notNull(),
    balanceAfterMicro: bigint("balance_after_micro", { mode: "number" }).notNull(),
    description: text("description").notNull(),
    txSignature: text("tx_signature").unique(),
    deploymentId: text("deployment_id"),
    depositId: text("deposit_id"),
    createdAt: bigint("created_at", { mode: "number" }).notNull(),
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
export const operatorEarnings = pgTable(
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
    amountMicro: bigint("amount_micro", { mode: "number" }).notNull(),
    createdAt: bigint("created_at", { mode: "number" }).notNull(),
  },
  (t) => [
    index("operator_earnings_operator_idx").on(t.operatorId, t.createdAt),
    index("operator_earnings_dep_idx").on(t.deploymentId),
    index("operator_earnings_txn_idx").on(t.creditTransactionId),
  ],
);

export const creditPackages = pgTable("credit_packages", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  credits: integer("credits").notNull(),
  bonusPercent: integer("bonus_percent").notNull(),
  priceUsdCents: integer("price_usd_cents").notNull(),
  sortOrder: integer("sort_order").notNull(),
});

export const deposits = pgTable(
  "deposits",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    packageId: text("package_id").notNull(),
    walletAddress: text("wallet_address").notNull(),
    amountStableBase: bigint("amount_stable_base", { mode: "number" }).notNull(),
    stableDecimals: integer("stable_decimals").notNull(),
    creditsMicro: bigint("credits_micro", { mode: "number" }).notNull(),
    treasuryWallet: text("treasury_wallet").notNull(),
    stableMint: text("stable_mint").notNull(),
    status: text("status", { enum: DEPOSIT_STATUSES }).notNull(),
    txSignature: text("tx_signature").unique(),
    transactionId: text("transaction_id"),
    /** The Solana Pay reference a payment names, by which the watcher finds it; null on deposits made before references. */
    reference: text("reference").unique(),
    expiresAt: bigint("expires_at", { mode: "number" }).notNull(),
    createdAt: bigint("created_at", { mode: "number" }).notNull(),
    confirmedAt: bigint("confirmed_at", { mode: "number" }),
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
export const payouts = pgTable(
  "payouts",
  {
    id: text("id").primaryKey(),
    operatorId: text("operator_id").notNull(),
    amountMicro: bigint("amount_micro", { mode: "number" }).notNull(),
    /** The same amount in the stablecoin's base units, fixed at request time. */
    amountStableBase: bigint("amount_stable_base", { mode: "number" }).notNull(),
    stableMint: text("stable_mint").notNull(),
    stableDecimals: integer("stable_decimals").notNull(),
    /** The operator's wallet: the one they sign in with. */
    walletAddress: text("wallet_address").notNull(),
    status: text("status", { enum: PAYOUT_STATUSES }).notNull(),
    /** Set when an administrator (PAYOUTS=manual) or the daily limit (PAYOUTS=auto) lets it be sent. */
    approvedAt: bigint("approved_at", { mode: "number" }),
    attempt: integer("attempt").notNull(),
    signature: text("signature").unique(),
    /** base64 of the signed transaction, sent again as is while its blockhash is valid. */
    signedTx: text("signed_tx"),
    lastValidBlockHeight: bigint("last_valid_block_height", { mode: "number" }),
    /** Signatures of earlier attempts, each seen expired without landing (space-separated, oldest first). */
    earlierSignatures: text("earlier_signatures").notNull(),
    /** Why it failed (status failed), or the last error while sending. */
    error: text("error"),
    /** Which control-plane process is sending it, until when: two never work on one payout at once. */
    leaseOwner: text("lease_owner"),
    leaseUntil: bigint("lease_until", { mode: "number" }),
    requestedAt: bigint("requested_at", { mode: "number" }).notNull(),
    paidAt: bigint("paid_at", { mode: "number" }),
    updatedAt: bigint("updated_at", { mode: "number" }).notNull(),
  },
  (t) => [index("payouts_operator_idx").on(t.operatorId, t.requestedAt), index("payouts_status_idx").on(t.status)],
);

export const deploymentLogs = pgTable(
  "deployment_logs",
  {
    id: serial("id").primaryKey(),
    deploymentId: text("deployment_id").notNull(),
    seq: integer("seq").notNull(),
    ts: text("ts").notNull(),
    tsMs: bigint("ts_ms", { mode: "number" }).notNull(),
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
export const registryCredentials = pgTable(
  "registry_credentials",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    /** The registry's host (and port), as image references name it: `ghcr.io`, `127.0.0.1:5000`. */
    registry: text("registry").notNull(),
    username: text("username").notNull(),
    /** base64 of iv | tag | ciphertext. */
    secretSealed: text("secret_sealed").notNull(),
    createdAt: bigint("created_at", { mode: "number" }).notNull(),
    lastUsedAt: bigint("last_used_at", { mode: "number" }),
  },
  (t) => [index("registry_credentials_user_idx").on(t.userId, t.createdAt)],
);

/** Seconds each node was heard from, per clock hour: uptime over 24 h, 7 d and 30 d is summed from these. */
export const nodeUptimeHours = pgTable(
  "node_uptime_hours",
  {
    nodeId: text("node_id").notNull(),
    /** Epoch hour: floor(ms / 3,600,000). */
    hour: integer("hour").notNull(),
    onlineMs: integer("online_ms").notNull().default(0),
  },
  (t) => [uniqueIndex("node_uptime_hours_pk").on(t.nodeId, t.hour)],
);

export const settings = pgTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
});

/**
 * Which control-plane replica holds each node's agent session now, and where the
 * other replicas reach it (REPLICA_ADDRESS): a tenant's endpoint, shell, TCP
 * connection or file read that arrives at another replica is carried there. A
 * replica that dies leaves its rows; the agent's reconnection to another
 * replica overwrites them within seconds.
 */
export const agentSessions = pgTable("agent_sessions", {
  nodeId: text("node_id").primaryKey(),
  replicaId: text("replica_id").notNull(),
  /** null: the replica takes no hops (no REPLICA_ADDRESS) */
  address: text("address"),
  since: bigint("since", { mode: "number" }).notNull(),
});
