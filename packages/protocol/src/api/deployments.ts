import { z } from "zod";
import { EnvMap, nameText, Pagination, pageQuery, queryInteger, Timestamp, text } from "./common";

/**
 * Every status a deployment can have. The spec names pending, starting, running,
 * stopping and "a stopped state"; the rest are ours (see deployment-states.ts).
 */
export const DEPLOYMENT_STATUSES = ["pending", "pulling", "starting", "running", "stopping", "stopped", "exited", "failed"] as const;
export const DeploymentStatus = z.enum(DEPLOYMENT_STATUSES);
export type DeploymentStatus = z.infer<typeof DeploymentStatus>;

export const Endpoint = z
  .object({
    type: z.literal("https"),
    url: z.string(),
    internalPort: z.number().int(),
    ready: z.boolean().meta({ description: "false while the container's port does not answer yet" }),
  })
  .meta({ id: "Endpoint" });

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
    diskGb: z.number().int().nullable().meta({
      description:
        "GB the container may write to its disk: its template's minDiskGb, or for a custom image its node's default. Past it the node stops the deployment, saying so in statusReason. null while the node's agent has not told its default.",
    }),
    hourlyRateCents: z.number().meta({ description: "credits per hour charged while running (1 credit = 1 US cent)" }),
    totalCost: z.number().meta({ description: "credits charged so far (1 credit = 1 US cent)" }),
    createdAt: Timestamp,
    startedAt: Timestamp.optional(),
    stoppedAt: Timestamp.optional(),
  })
  .meta({ id: "Deployment" });
export type Deployment = z.infer<typeof Deployment>;

const Port = z.number().int().min(1).max(65535);

export const CreateDeploymentRequest = z.strictObject({
  nodeId: text().min(1).max(64),
  templateId: text().min(1).max(64).optional(),
  customImage: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[a-zA-Z0-9][a-zA-Z0-9._\-/:@]*$/, "must be an image reference such as ubuntu:22.04 or ghcr.io/org/app:tag")
    .nullable()
    .optional(),
  name: nameText(100).optional(),
  env: EnvMap.optional(),
  ports: z.array(Port).max(16).optional().meta({ description: "container ports to expose as endpoints; defaults to the template's or the image's" }),
});
export type CreateDeploymentRequest = z.infer<typeof CreateDeploymentRequest>;

export const CreateDeploymentResponse = z.object({
  deployment: Deployment,
  estimatedHourlyCost: z.number().meta({ description: "credits per hour (1 credit = 1 US cent)" }),
});
export const DeploymentListQuery = z.strictObject({ status: DeploymentStatus.optional(), ...pageQuery(100) });
export const DeploymentListResponse = z.object({ deployments: z.array(Deployment), pagination: Pagination });
export const DeploymentResponse = z.object({ deployment: Deployment });
export const DeploymentActionResponse = z.object({ deployment: Deployment });
export const DeleteDeploymentResponse = z.object({ success: z.boolean(), message: z.string() });

export const LogEntry = z.object({ timestamp: Timestamp, stream: z.enum(["stdout", "stderr"]), message: z.string() }).meta({ id: "LogEntry" });
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
