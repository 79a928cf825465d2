import { z } from "zod";
import { DEPLOYMENT_STATUSES } from "../lists";
import { TCP_MAX_PORTS } from "../tcp";
import { EnvMap, INT32_MAX, nameText, Pagination, pageQuery, queryInteger, SuccessResponse, Timestamp, text, utf8Bytes } from "./common";
import { MAX_GPUS_PER_NODE, Region } from "./nodes";

export { DEPLOYMENT_STATUSES };
export const DeploymentStatus = z.enum(DEPLOYMENT_STATUSES);
export type DeploymentStatus = z.infer<typeof DeploymentStatus>;

/**
 * An argv a tenant gives (command, entrypoint): storable text, bounded like env
 * so that every spec stays far below the agent's frame limit: command and
 * entrypoint together weigh at most ENV_MAX_TOTAL_BYTES, the env's own budget.
 * Linux caps one argument at 128 KiB; these are far below.
 */
export const ARGV_MAX_ITEMS = 256;
export const ARGV_ITEM_MAX_LENGTH = 4096;
export const ARGV_MAX_TOTAL_BYTES = 32 * 1024;
/** What an argv weighs: each item in UTF-8 plus its terminating NUL, as execve counts. */
export const argvBytes = (argv: readonly string[]) => argv.reduce((sum, a) => sum + utf8Bytes(a) + 1, 0);
export const Argv = z
  .array(text().max(ARGV_ITEM_MAX_LENGTH))
  .min(1)
  .max(ARGV_MAX_ITEMS)
  .refine((argv) => argvBytes(argv) <= ARGV_MAX_TOTAL_BYTES, `at most ${ARGV_MAX_TOTAL_BYTES / 1024} KiB in all (UTF-8)`);

/** What the node does when a deployment's container exits by itself with a non-zero code. */
export const RESTART_POLICIES = ["no", "on-failure"] as const;
export const RestartPolicy = z.enum(RESTART_POLICIES);
export type RestartPolicy = z.infer<typeof RestartPolicy>;
/** Restarts of one start at most (Docker's MaximumRetryCount): a command that always fails costs the tenant a bounded number of runs. */
export const MAX_RESTARTS_LIMIT = 10;
export const DEFAULT_MAX_RESTARTS = 3;
/**
 * The wait before restart n of a run that failed, doubling from 1 s up to
 * RESTART_BACKOFF_MAX_MS (1, 2, 4, 8, 16, 30, 30... s), as Docker's and
 * Kubernetes' restart policies wait: a command that fails at once neither
 * spins on the node nor gives up before what it waits on (a database, a
 * model download) is up. The deployment is starting meanwhile, never billed.
 */
export const RESTART_BACKOFF_BASE_MS = 1_000;
export const RESTART_BACKOFF_MAX_MS = 30_000;
export const restartDelayMs = (restartCount: number) =>
  restartCount <= 0 ? 0 : Math.min(RESTART_BACKOFF_MAX_MS, RESTART_BACKOFF_BASE_MS * 2 ** (restartCount - 1));

/** cpuCores are held and stored in thousandths of a core: integer arithmetic on both databases. */
export const MILLICORES_PER_CORE = 1000;
export const MIN_CPU_CORES = 0.01;
/**
 * How Docker holds a container to its cpuCores. "quota": a hard cap
 * (NanoCpus) and a CPU weight in proportion, for the cores a tenant asked
 * for. "weight": the weight alone (CpuShares, 1,024 a core), for cores a
 * deployment got by default: it gets its share of a busy node and may use
 * idle cores, as a Kubernetes request without a limit. A default's hard quota
 * was the node's share per slot (0.04 cores on 2 cores and 50 slots), inside
 * which runc's own start ran: create + start took 810-980 ms against 390-430
 * ms with no quota (README, "What one deployment may take of a node").
 */
export const CPU_LIMITS = ["quota", "weight"] as const;
export type CpuLimit = (typeof CPU_LIMITS)[number];
/** Docker refuses a memory limit under 6 MB; a container below this hardly starts. */
export const MIN_MEMORY_MB = 64;
/** What a deployment with no GPU holds by default: a small VM's worth, or less on a node with many slots. */
export const CPU_ONLY_DEFAULT_CPU_CORES = 2;
export const CPU_ONLY_DEFAULT_MEMORY_MB = 4096;
/**
 * A tenth of a node's RAM stays for the host, Docker and the agent: what the
 * node's deployments may hold in all, and the most the agent gives one.
 */
export const HOST_RAM_RESERVE_DIVISOR = 10;
export const usableRamMb = (ramMb: number) => ramMb - Math.floor(ramMb / HOST_RAM_RESERVE_DIVISOR);

export const Endpoint = z
  .object({
    type: z.literal("https"),
    url: z.string(),
    internalPort: z.number().int(),
    ready: z.boolean().meta({ description: "false while the container's port does not answer yet" }),
  })
  .meta({ id: "Endpoint" });

/**
 * On an answer the gateway gives itself (nothing answers on the port yet, the node is
 * away, no such endpoint), never on one a container gave: how a client waiting for an
 * endpoint tells the two apart. Its value is the failure's code, such as PORT_NOT_READY.
 */
export const GATEWAY_ERROR_HEADER = "x-gateway-error";

export const Deployment = z
  .object({
    id: z.string(),
    userId: z.string(),
    nodeId: z.string(),
    templateId: z.string().optional(),
    name: z.string().optional(),
    image: z.string().meta({ description: "the container image that runs" }),
    status: DeploymentStatus,
    statusReason: z.string().nullable().meta({ description: "why it is in this status, readable; null when nothing to say" }),
    exitCode: z.number().int().nullable(),
    endpoints: z.array(Endpoint),
    env: z.record(z.string(), z.string()),
    ports: z.array(z.number().int()),
    tcpPorts: z.array(z.number().int()).meta({
      description:
        "container ports reached as raw TCP through the control plane (GET /deployments/{id}/tcp/{port}, cm port-forward, cm ssh); no public endpoint",
    }),
    command: z.array(z.string()).nullable().meta({ description: "the container's command (argv), replacing the image's CMD; null: the image's" }),
    entrypoint: z.array(z.string()).nullable().meta({ description: "the container's entrypoint (argv), replacing the image's ENTRYPOINT; null: the image's" }),
    registryCredentialId: z
      .string()
      .nullable()
      .meta({ description: "the registry credential its image is pulled with (its id only, never the secret); null: pulled anonymously or local" }),
    restart: RestartPolicy.meta({
      description: "on-failure: a container that exits with a non-zero code is started again, up to maxRestarts times per start; no: never",
    }),
    maxRestarts: z.number().int().meta({ description: "restarts allowed per start under on-failure; 0 under no" }),
    restartCount: z.number().int().meta({
      description:
        "restarts since the deployment was last started (by its creation or the tenant); each one shows as a move from running to starting, its statusReason saying which and how long it waits (restarting (2 of 3) in 2 s)",
    }),
    diskGb: z.number().int().nullable().meta({
      description:
        "GB the container may write to its disk: the diskGb asked for at creation, else its template's minDiskGb, or for a custom image its node's default. Past it the node stops the deployment, saying so in statusReason. null while the node's agent has not told its default.",
    }),
    gpuCount: z.number().int().meta({ description: "whole GPUs of its node it holds, no other deployment's: 0 for CPU-only" }),
    cpuCores: z.number().meta({
      description:
        "CPU cores it holds of its node's: when asked for at creation, the most it may use (Docker's NanoCpus); by default, its share of a busy node's CPU (Docker's CpuShares), using idle cores beyond it. 0 on deployments made before resources were counted (the node's fair share)",
    }),
    memoryMb: z.number().int().meta({
      description: "MB of memory it may use (Docker's Memory, no swap on top) and holds of its node's; 0 on deployments made before resources were counted",
    }),
    hourlyRateCents: z.number().meta({
      description:
        "credits per hour charged while running (1 credit = 1 US cent), fixed when it was created: its node's hourlyRateCents (the price of one GPU-hour) times gpuCount, or once for a CPU-only deployment",
    }),
    totalCost: z.number().meta({ description: "credits charged so far (1 credit = 1 US cent)" }),
    createdAt: Timestamp,
    startedAt: Timestamp.optional(),
    stoppedAt: Timestamp.optional(),
  })
  .meta({ id: "Deployment" });
export type Deployment = z.infer<typeof Deployment>;

const Port = z.number().int().min(1).max(65535);

/** Candidates create tries, cheapest first, when a node it picked was taken by a parallel create meanwhile. */
export const PLACEMENT_MAX_TRIES = 3;

export const CreateDeploymentRequest = z.strictObject({
  nodeId: text().min(1).max(64).optional().meta({
    description:
      "the node to run on; left out, the control plane picks the cheapest online node that fits gpuCount, the resources, minGpuVram, gpuModel, region and maxHourlyRate (ties: most free GPUs, then id), or answers NO_NODE_FITS counting the nodes per reason",
  }),
  minGpuVram: z.number().int().min(0).max(INT32_MAX).optional().meta({
    description: "MB of memory the node's largest GPU has at least (the catalogue's filter); with nodeId, that node must have it",
  }),
  gpuModel: text()
    .min(1)
    .max(256)
    .optional()
    .meta({ description: "a GPU name the node must have, matched case-insensitively as a part of its GPUs' names (H100 matches NVIDIA H100 80GB HBM3)" }),
  region: Region.optional().meta({ description: "only a node in this region (the catalogue's filter)" }),
  maxHourlyRate: z.number().min(0).max(INT32_MAX).optional().meta({
    description: "credits per GPU-hour at most: the node's hourlyRateCents, as the catalogue's filter (a fraction is allowed: 1.5 takes nodes at 1 or less)",
  }),
  templateId: text().min(1).max(64).optional(),
  customImage: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[a-zA-Z0-9][a-zA-Z0-9._\-/:@]*$/, "must be an image reference such as ubuntu:22.04 or ghcr.io/org/app:tag")
    .nullable()
    .optional(),
  name: nameText(100).optional(),
  registryCredentialId: text().min(1).max(64).optional().meta({
    description:
      "a registry credential of yours (POST /registry-credentials) for customImage's registry: the node pulls the image with it when it does not hold the image yet. Never picked for you: without it the image is pulled anonymously. Not yours or unknown: REGISTRY_CREDENTIAL_NOT_FOUND; for another registry than the image's: REGISTRY_CREDENTIAL_MISMATCH, both before anything is held",
  }),
  env: EnvMap.optional(),
  ports: z.array(Port).max(16).optional().meta({ description: "container ports to expose as endpoints; defaults to the template's or the image's" }),
  tcpPorts: z
    .array(Port)
    .max(TCP_MAX_PORTS)
    .refine((ports) => new Set(ports).size === ports.length, "each port at most once")
    .optional()
    .meta({
      uniqueItems: true,
      description: `container ports (at most ${TCP_MAX_PORTS}, each once) reached as raw TCP through the control plane, never from the internet: GET /deployments/{id}/tcp/{port} (a WebSocket), which cm port-forward and cm ssh open. A port is either an HTTP endpoint (ports, or the template's) or a TCP port: one in both is refused (VALIDATION_ERROR)`,
    }),
  gpuCount: z.number().int().min(0).max(MAX_GPUS_PER_NODE).optional().meta({
    description:
      "whole GPUs to hold on the node, 0 to its GPU count; default: 1 for a template that needs a GPU, else 0 (a custom image gets none unless it asks). The rate is the node's hourlyRateCents per GPU (once when 0). More than the node's free GPUs: NODE_INSUFFICIENT_FREE_GPUS",
  }),
  cpuCores: z
    .number()
    .min(MIN_CPU_CORES)
    .max(65_536)
    .optional()
    .meta({
      description: `CPU cores (to ${1 / MILLICORES_PER_CORE} core) the container may use at most, held of the node's; default (held the same, but a share of a busy node rather than a cap): the node's cores times gpuCount over its GPUs, or for gpuCount 0 ${CPU_ONLY_DEFAULT_CPU_CORES} cores or the node's cores over its maxDeployments when less; never less than a template's minCpuCores`,
    }),
  memoryMb: z
    .number()
    .int()
    .min(MIN_MEMORY_MB)
    .max(64 * 1024 * 1024)
    .optional()
    .meta({
      description: `MB of memory the container may use, held of the node's ramMb; default: as cpuCores, ${CPU_ONLY_DEFAULT_MEMORY_MB} MB for gpuCount 0 (or the node's RAM over its maxDeployments when less); never less than a template's minRamMb`,
    }),
  diskGb: z.number().int().min(1).max(10_000_000).optional().meta({
    description:
      "GB the container may write, held of the node's disk (specs.diskGb) while the deployment is live; default: its template's minDiskGb, or the node's default for a custom image",
  }),
  command: Argv.optional().meta({
    description: `the command to run (argv: program, then arguments), replacing the image's CMD (Docker's Cmd): at most ${ARGV_MAX_ITEMS} items of ${ARGV_ITEM_MAX_LENGTH} characters, ${ARGV_MAX_TOTAL_BYTES / 1024} KiB in all. An image its node holds with neither a CMD nor an ENTRYPOINT needs one: refused at create (IMAGE_HAS_NO_COMMAND) when the node has reported it, else failed on the node with a reason saying so`,
  }),
  entrypoint: Argv.optional().meta({
    description: `replaces the image's ENTRYPOINT (Docker's Entrypoint), bounded as command; [""] clears it`,
  }),
  restart: RestartPolicy.optional().meta({
    description: `no (the default), or on-failure: restart a container that exits with a non-zero code, restart n after a wait of ${RESTART_BACKOFF_BASE_MS / 1000} s doubling each time up to ${RESTART_BACKOFF_MAX_MS / 1000} s (starting meanwhile, holding the slot: the wait is charged once the new run is running)`,
  }),
  maxRestarts: z
    .number()
    .int()
    .min(1)
    .max(MAX_RESTARTS_LIMIT)
    .optional()
    .meta({
      description: `restarts per start under restart on-failure (default ${DEFAULT_MAX_RESTARTS}, at most ${MAX_RESTARTS_LIMIT}); given alone it means restart on-failure, with restart "no" it is refused (RESTART_POLICY_CONFLICT)`,
    }),
});
export type CreateDeploymentRequest = z.infer<typeof CreateDeploymentRequest>;

export const CreateDeploymentResponse = z.object({
  deployment: Deployment,
  estimatedHourlyCost: z.number().meta({ description: "credits per hour (1 credit = 1 US cent)" }),
});
export const DeploymentEstimateResponse = z
  .object({
    fits: z.boolean().meta({ description: "true when POST /deployments with this body would create it now (on nodeId, or the node it would pick)" }),
    refusal: z
      .object({ code: z.string(), message: z.string(), details: z.unknown().optional() })
      .nullable()
      .meta({ description: "when it does not fit: the error POST /deployments would answer now (same code, message and details); null when it fits" }),
    nodeId: z.string().nullable().meta({ description: "the node it would run on: nodeId as given, or the one placement picks; null when no node fits" }),
    hourlyRateCents: z.number().nullable().meta({ description: "credits per hour it would be charged while running; null when no node was found to price it" }),
    holdCredits: z
      .number()
      .nullable()
      .meta({ description: "credits held from your available balance while it is live: one hour of its rate, as create holds" }),
    gpuCount: z.number().int().nullable(),
    cpuCores: z.number().nullable(),
    memoryMb: z.number().int().nullable(),
    diskGb: z.number().int().nullable().meta({
      description:
        "the disk allowance it would hold: as asked, else the template's minDiskGb, else the node's default; null while the node's agent has not told its default",
    }),
  })
  .meta({ id: "DeploymentEstimate" });
export type DeploymentEstimateResponse = z.infer<typeof DeploymentEstimateResponse>;
export const DeploymentListQuery = z.strictObject({ status: DeploymentStatus.optional(), ...pageQuery(100) });
export const DeploymentListResponse = z.object({ deployments: z.array(Deployment), pagination: Pagination });
export const DeploymentResponse = z.object({ deployment: Deployment });
export const DeploymentActionResponse = z.object({ deployment: Deployment });
export const DeleteDeploymentResponse = SuccessResponse;

export const LogEntry = z
  .object({
    timestamp: Timestamp,
    stream: z.enum(["stdout", "stderr"]),
    message: z.string(),
    seq: z.number().int().min(0).meta({
      description:
        "the line's number within its deployment, in the order it was written (numbers may have gaps), as the logs stream's event ids: lines are answered in this order. A poller keeps the highest it has read and, asking again with `since` the newest line's timestamp, skips the lines at or below it: none repeated, none lost when several lines share a timestamp",
    }),
  })
  .meta({ id: "LogEntry" });
/** Each deployment keeps its highest-numbered lines, this many at most: whatever order, gaps or repeats its agent sends them in. */
export const LOG_LINES_KEPT = 10_000;
/**
 * The most message text (UTF-8 bytes) one GET /deployments/:id/logs answers: a
 * tail of 10,000 lines of 16 KiB each (160 MB) read at once took 400 MB of the
 * control plane's memory. Past it the oldest lines of the tail are left out and
 * `truncated` says so; the stream sends a tail of any size, page by page.
 */
export const LOG_READ_MAX_BYTES = 4 * 1024 * 1024;
export const LogsQuery = z.strictObject({
  tail: queryInteger(z.number().int().min(1).max(LOG_LINES_KEPT)).default(100),
  since: z.iso.datetime({ offset: true }).optional(),
});
export const LogsResponse = z.object({
  logs: z.array(LogEntry),
  truncated: z.boolean().meta({
    description: `true when older lines of the tail were left out because the lines hold more than ${LOG_READ_MAX_BYTES / 1024 / 1024} MiB of text; follow the logs stream to read them all`,
  }),
});

/*
 * GET /deployments/:id/logs/stream: Server-Sent Events. Each line is a message
 * event whose id is the line's number and whose data is a LogEntry; the `end`
 * event says the deployment has ended and its last lines are out.
 */
export const LOG_STREAM_END_EVENT = "end";
/**
 * The event a stream (logs or events) ends with when it cannot go on; its data
 * is the API's error shape. UNAUTHORIZED: the sign-in that opened it is over
 * (sign in again); TOKEN_EXPIRED: its access token expired (refresh, then
 * reconnect with Last-Event-ID); INTERNAL_ERROR: reconnect to resume.
 */
export const LOG_STREAM_ERROR_EVENT = "error";
/** A comment this often keeps proxies from closing a quiet stream. */
export const LOG_STREAM_KEEP_ALIVE_MS = 15_000;
export const LogStreamHeaders = z.object({
  "last-event-id": z
    .string()
    .regex(/^\d{1,15}$/, "must be the id of an event this stream sent")
    .optional()
    .meta({ description: "Resume after this line: the id of the last event read (browsers' EventSource sends it by itself on reconnect)" }),
});
export const LogStreamEnd = z.object({ status: z.union([DeploymentStatus, z.literal("deleted")]) }).meta({ id: "LogStreamEnd" });
