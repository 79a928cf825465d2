import { z } from "zod";
import { text } from "../api/common";
import { CPU_LIMITS, RESTART_BACKOFF_MAX_MS } from "../api/deployments";
import { EgressPolicy, Gpu, MAX_GPUS_PER_NODE, NodeSpecs } from "../api/nodes";
import { ExecCommand } from "../exec";
import { ArchiveErrorCode, FilesPath } from "../files";

/**
 * The agent <-> control plane wire, spoken as JSON text frames over one
 * WebSocket that the agent opens to `GET /agent/ws`. Every frame is parsed
 * against these schemas on arrival at both ends.
 *
 * Versioning: the agent lists the protocol versions it speaks in `hello`; the
 * control plane picks the highest it also speaks and names it in `welcome`, or
 * sends `error` with code `UNSUPPORTED_PROTOCOL` and closes with 4406. Within
 * a version, fields are only ever added as optional, and unknown fields are
 * ignored, so an older agent keeps working against a newer control plane.
 */
export const PROTOCOL_VERSIONS = [1] as const;
export const CURRENT_PROTOCOL_VERSION = 1;

/** WebSocket close codes: the agent retries after all of them except the 44xx "fix your setup" ones. */
export const CLOSE_CODES = {
  NORMAL: 1000,
  GOING_AWAY: 1001,
  UNAUTHORIZED: 4401, // unknown or retired node token: do not retry until the token changes
  REPLACED: 4409, // a newer connection with the same token took over: do not fight it
  UNSUPPORTED_PROTOCOL: 4406, // upgrade the agent
  BAD_FRAMES: 4400, // too many frames that failed to parse
  HELLO_TIMEOUT: 4408, // no hello in time
  RETIRED: 4410, // the operator retired this node: drain (stop and remove its containers and sandboxes), then exit
} as const;
/**
 * The longest an agent waits between two reconnection attempts. A control
 * plane that has just started, or resumed after a stall, cannot have heard
 * agents still waiting out their backoff: it gives every node this long beyond
 * its three heartbeat intervals before finding it silent.
 */
export const AGENT_RECONNECT_MAX_MS = 30_000;
/**
 * The largest frame an agent reads from the control plane (its socket's
 * maxPayload), unless its hello names another. The control plane never sends a
 * bigger one: a sync that would be is sent in parts (SyncFrame.more), and no
 * single deployment's spec comes near it (EnvMap bounds a deployment's env).
 */
export const AGENT_MAX_INBOUND_FRAME_BYTES = 16 * 1024 * 1024;
/** The smallest inbound limit an agent may announce: room for the largest single deployment spec. */
export const AGENT_MIN_INBOUND_FRAME_BYTES = 1024 * 1024;
export const RETRYABLE_CLOSE = (code: number) =>
  code !== CLOSE_CODES.UNAUTHORIZED && code !== CLOSE_CODES.REPLACED && code !== CLOSE_CODES.UNSUPPORTED_PROTOCOL && code !== CLOSE_CODES.RETIRED;

// ---- shared pieces ---------------------------------------------------------

/*
 * Every string, number and list an agent sends is bounded (see NodeSpecs): a
 * frame that breaks a bound is refused like one that does not parse, and
 * nothing of it is stored.
 */
/** Ids the control plane hands out (dep_..., cmd_..., tunnel ids): short tokens. */
const Id = z.string().min(1).max(128);
/** Readable text an agent reports, for tenants or operators. */
const Reason = text().max(2000);
/** A time in milliseconds since the epoch. */
const EpochMs = z.number().int().min(0).max(8_640_000_000_000_000);

/** A GPU as the agent reports it: the catalogue's fields plus what assignment needs. */
export const GpuReport = Gpu.extend({ index: z.number().int().min(0).max(1023), uuid: z.string().max(128) });
export type GpuReport = z.infer<typeof GpuReport>;

/** What the control plane wants of a deployment; the agent converges its node to it. */
export const DESIRED_STATES = ["running", "stopped", "removed"] as const;
export const DesiredState = z.enum(DESIRED_STATES);
export type DesiredState = z.infer<typeof DesiredState>;

/** Where log shipping resumes: the last line the control plane stored. */
export const LogCursor = z.object({ seq: z.number().int().min(0), dockerTs: z.string().nullable() });
export type LogCursor = z.infer<typeof LogCursor>;

/**
 * A tenant's registry login, as Docker's pull takes it (X-Registry-Auth). Sent
 * only inside the create or start command of the deployment whose image it
 * pulls (and in a sync while that deployment is still to start): the agent
 * never keeps it, logs it or puts it on the container.
 */
export const RegistryAuth = z.object({
  serveraddress: z.string().max(300),
  username: z.string().max(300),
  password: z.string().max(16 * 1024),
});
export type RegistryAuth = z.infer<typeof RegistryAuth>;

/** Everything the agent needs to make one deployment real. */
export const DeploymentSpec = z.object({
  deploymentId: z.string(),
  userId: z.string(),
  /** Bumped on every start: a report for an older run is stale and ignored. */
  runSeq: z.number().int().min(0),
  /**
   * Wait this long before starting this run (restartDelayMs: a restart's
   * backoff), unless a newer desired state comes first. Absent: at once.
   */
  startDelayMs: z.number().int().min(0).max(RESTART_BACKOFF_MAX_MS).optional(),
  desiredState: DesiredState,
  image: z.string(),
  env: z.record(z.string(), z.string()),
  ports: z.array(z.number().int()),
  /** Ports a tunnel may reach as raw TCP besides `ports` (cm port-forward); never probed as endpoints. Absent: none. */
  tcpPorts: z.array(z.number().int().min(1).max(65535)).max(64).optional(),
  /** Replace the image's CMD and ENTRYPOINT; absent, the image's. Sent, like env, only while wanted running. */
  command: z.array(z.string()).optional(),
  entrypoint: z.array(z.string()).optional(),
  gpuCount: z.number().int().min(0),
  cpuCores: z.number().min(0).optional(),
  /** How cpuCores is enforced (CPU_LIMITS); absent: "quota", as agents before it did. Sent only as "weight". */
  cpuLimit: z.enum(CPU_LIMITS).optional(),
  memoryMb: z.number().int().min(0).optional(),
  /** The deployment's disk allowance (its template's minDiskGb); absent, the node's default for custom images. */
  diskGb: z.number().int().min(1).optional(),
  logCursor: LogCursor,
  /** The login to pull `image` with, when it is private and not on the node yet; absent: pulled anonymously. */
  registryAuth: RegistryAuth.optional(),
  /**
   * This run's container was reported running. Found missing, it was removed
   * behind the agent's back (docker rm on the node): the agent reports it
   * removed rather than starting it afresh, which would charge a tenant for a
   * run nobody asked for. Absent: not started yet.
   */
  started: z.literal(true).optional(),
  /**
   * A stopped deployment whose node was lost and came back: its container is
   * kept stopped, with its files, until this instant (LOST_RETENTION_S after
   * the loss), then removed. Absent: kept until the deployment is deleted or
   * started again.
   */
  removeAfter: EpochMs.optional(),
});
export type DeploymentSpec = z.infer<typeof DeploymentSpec>;

/** What really happens on the node, reported by the agent. */
export const ObservedStatus = z.enum(["pulling", "starting", "running", "stopped", "exited", "failed", "removed"]);
export type ObservedStatus = z.infer<typeof ObservedStatus>;

export const LogLineFrame = z.object({
  seq: z.number().int().min(1),
  /** Docker's RFC 3339 timestamp with nanoseconds: also the resume point. */
  ts: z.string().max(64),
  stream: z.enum(["stdout", "stderr"]),
  message: z.string().max(64 * 1024),
});
export type LogLineFrame = z.infer<typeof LogLineFrame>;

// ---- agent -> control plane ------------------------------------------------

export const HelloFrame = z.object({
  type: z.literal("hello"),
  token: z.string().min(1).max(200),
  agentVersion: z.string().max(50),
  protocolVersions: z.array(z.number().int()).min(1).max(16),
  /** The largest frame this agent reads; absent, AGENT_MAX_INBOUND_FRAME_BYTES. */
  maxFrameBytes: z
    .number()
    .int()
    .min(AGENT_MIN_INBOUND_FRAME_BYTES)
    .max(1024 * 1024 * 1024)
    .optional(),
});
/** The most command-less images an agent reports (SpecsFrame.imagesWithoutCommand). */
export const MAX_IMAGES_WITHOUT_COMMAND = 256;
export const SpecsFrame = z.object({
  type: z.literal("specs"),
  specs: NodeSpecs,
  gpus: z.array(GpuReport).max(MAX_GPUS_PER_NODE),
  gpuWarning: Reason.optional(),
  /**
   * Whether the node's firewall keeps tenants' containers off its host and
   * networks: "off" when its operator opted out, which tenants should be told.
   * Absent from agents that predate the policy.
   */
  egressPolicy: EgressPolicy.optional(),
  /**
   * The disk allowance of a deployment whose spec names none (a custom image),
   * in GB: AGENT_DISK_DEFAULT_GB. Absent from agents that predate it.
   */
  diskDefaultGb: z.number().int().min(1).max(10_000_000).optional(),
  /**
   * Local images with neither a CMD nor an ENTRYPOINT, by the names Docker lists
   * them under (RepoTags), at most MAX_IMAGES_WITHOUT_COMMAND. A node runs a
   * local image as it is, never pulled again, so a deployment naming one and
   * giving no command cannot start there: the control plane refuses it at create
   * (IMAGE_HAS_NO_COMMAND). Absent from agents that predate it.
   */
  imagesWithoutCommand: z.array(z.string().min(1).max(255)).max(MAX_IMAGES_WITHOUT_COMMAND).optional(),
});
export const HeartbeatFrame = z.object({
  type: z.literal("heartbeat"),
  sentAt: EpochMs,
  /** Deployments whose containers run right now, so the control plane can notice drift. */
  running: z.array(Id).max(4096).optional(),
});
export const StatusFrame = z.object({
  type: z.literal("status"),
  deploymentId: Id,
  runSeq: z.number().int().min(0),
  status: ObservedStatus,
  /** Readable, for the tenant: "image ... is not present on this node and could not be pulled: ...". */
  reason: Reason.optional(),
  exitCode: z.number().int().min(-2_147_483_648).max(4_294_967_295).optional(),
  at: EpochMs,
});
export const PullProgressFrame = z.object({
  type: z.literal("pull_progress"),
  deploymentId: Id,
  layersDone: z.number().int().min(0).max(100_000),
  layersTotal: z.number().int().min(0).max(100_000),
  bytesDone: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  bytesTotal: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});
export const LogsFrame = z.object({
  type: z.literal("logs"),
  deploymentId: Id,
  lines: z.array(LogLineFrame).min(1).max(5000),
});
export const AckFrame = z.object({
  type: z.literal("ack"),
  commandId: Id,
  ok: z.boolean(),
  error: Reason.optional(),
});

/**
 * The agent could not open a tunnel it was asked for: nothing listens on the port, or the container is gone.
 * For an `open_archive`, `code` says which refusal it is (absent from agents before it: a failure).
 */
export const TunnelErrorFrame = z.object({ type: z.literal("tunnel_error"), tunnelId: Id, reason: Reason, code: ArchiveErrorCode.optional() });
/** Which of a running deployment's exposed ports accept connections, as the agent last probed them. */
export const EndpointsFrame = z.object({
  type: z.literal("endpoints"),
  deploymentId: Id,
  ports: z.array(z.object({ port: z.number().int().min(1).max(65535), ready: z.boolean() })).max(64),
});

export const AgentFrame = z.discriminatedUnion("type", [
  HelloFrame,
  SpecsFrame,
  HeartbeatFrame,
  StatusFrame,
  PullProgressFrame,
  LogsFrame,
  AckFrame,
  TunnelErrorFrame,
  EndpointsFrame,
  z.object({ type: z.literal("error"), code: z.string().max(64), message: Reason }),
]);
export type AgentFrame = z.infer<typeof AgentFrame>;

// ---- control plane -> agent ------------------------------------------------

export const WelcomeFrame = z.object({
  type: z.literal("welcome"),
  protocolVersion: z.number().int(),
  nodeId: z.string(),
  heartbeatIntervalMs: z.number().int().min(100),
  serverTime: z.number().int(),
  /** The largest frame the control plane reads; a bigger one closes the connection (1009), so split log batches below it. */
  maxFrameBytes: z.number().int().min(1024).optional(),
});
/**
 * The full desired state of the node: sent after welcome, and whenever the agent
 * should reconcile everything. A node's history can be long, so the state comes
 * in parts below the agent's frame limit: `more: true` on every part but the
 * last, and the agent reconciles once, with all of them, when the last arrives
 * (a connection lost between parts drops the parts; the next welcome syncs anew).
 * Deployments not wanted running carry no env: the agent only stops or removes them.
 */
export const SyncFrame = z.object({ type: z.literal("sync"), deployments: z.array(DeploymentSpec), more: z.boolean().optional() });
/** What a command asks the agent to do with one deployment. */
export const CommandAction = z.enum(["create", "start", "stop", "remove"]);
export type CommandAction = z.infer<typeof CommandAction>;
/** One change to one deployment; the agent acknowledges it with `ack` once it has acted. */
export const CommandFrame = z.object({
  type: z.literal("command"),
  commandId: z.string(),
  action: CommandAction,
  deployment: DeploymentSpec,
});
export const LogsAckFrame = z.object({ type: z.literal("logs_ack"), deploymentId: z.string(), cursor: LogCursor });
/**
 * The operator retired this node. The control plane has already stopped its
 * deployments (stop commands come before this frame) and keeps the connection
 * open for up to RETIRE_DRAIN_MS so that their last log lines still arrive;
 * the agent takes no more work, removes every container and network sandbox it
 * made for the node, closes with 1000 and exits. Past the drain time, or when
 * a retired node's agent says hello, the control plane closes with
 * CLOSE_CODES.RETIRED and the agent drains without shipping.
 */
export const RetiredFrame = z.object({ type: z.literal("retired"), message: z.string().max(2000) });
/** How long a retired node's connection stays open for its agent to drain. */
export const RETIRE_DRAIN_MS = 60_000;
/**
 * The reason of a RETIRED close names the node: an agent refused at hello never
 * had a welcome, and needs the node id to know which containers were its.
 */
export const retiredCloseReason = (nodeId: string) => `node ${nodeId} was retired`;
export const retiredNodeOf = (reason: string): string | undefined => /^node (\S+) was retired$/.exec(reason)?.[1];
export const ServerErrorFrame = z.object({ type: z.literal("error"), code: z.string(), message: z.string() });
/**
 * Asks the agent to carry one public-endpoint connection: connect to the
 * deployment's container on `port`, then open a connection of its own to
 * `/agent/tunnel?id=<tunnelId>` (with its agent token), upgrade it to
 * AGENT_TUNNEL_UPGRADE and splice the two. On failure it answers `tunnel_error`.
 */
export const OpenTunnelFrame = z.object({
  type: z.literal("open_tunnel"),
  tunnelId: z.string(),
  deploymentId: z.string(),
  port: z.number().int().min(1).max(65535),
});
/**
 * Asks the agent to run a command in the deployment's running container (exec.ts):
 * it opens a WebSocket of its own to AGENT_EXEC_PATH `?id=<execId>` (with its agent
 * token) and carries the session's messages on it; a refusal is an `error` message there.
 */
export const OpenExecFrame = z.object({
  type: z.literal("open_exec"),
  execId: z.string(),
  deploymentId: z.string(),
  command: ExecCommand,
  tty: z.boolean(),
  cols: z.number().int().min(1).max(1000).optional(),
  rows: z.number().int().min(1).max(1000).optional(),
});
/**
 * Asks the agent to read `path` of the deployment's container, running or not,
 * as a tar archive (files.ts): it opens a tunnel connection of its own (as for
 * `open_tunnel`), writes the archive on it and ends it; closing it from here
 * ends the read. On failure it answers `tunnel_error` with a `code`.
 */
export const OpenArchiveFrame = z.object({
  type: z.literal("open_archive"),
  tunnelId: z.string(),
  deploymentId: z.string(),
  path: FilesPath,
});
export const AGENT_TUNNEL_PATH = "/agent/tunnel";
/** Where the agent opens its one control connection (a WebSocket). */
export const AGENT_WS_PATH = "/agent/ws";
/**
 * `GET` with `Authorization: Bearer <agent token>`: which node the token
 * belongs to (AgentWhoamiResponse), or 401 in the API's error shape. How the
 * doctor and the installer check a token: unlike a hello it neither takes over
 * the node's session (a running agent keeps it) nor marks the node online.
 */
export const AGENT_WHOAMI_PATH = "/agent/whoami";
export const AgentWhoamiResponse = z.object({ nodeId: z.string(), name: z.string() }).meta({ id: "AgentWhoamiResponse" });
export type AgentWhoamiResponse = z.infer<typeof AgentWhoamiResponse>;
/**
 * The `Upgrade` token of a tunnel connection: after the 101 the connection
 * carries the tenant's bytes as they are, no framing. A WebSocket (what agents
 * before 0.2 ask for) costs a frame header, a mask and a copy per chunk at both
 * ends; at thousands of requests a second that was a fifth of the relay's CPU.
 * Reverse proxies pass any upgrade token on (nginx's `$http_upgrade`).
 */
export const AGENT_TUNNEL_UPGRADE = "cm-tunnel";
/** The control plane's answer that switches a tunnel connection to raw bytes. */
export const TUNNEL_SWITCHING_PROTOCOLS = `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${AGENT_TUNNEL_UPGRADE}\r\n\r\n`;

export const ServerFrame = z.discriminatedUnion("type", [
  WelcomeFrame,
  SyncFrame,
  CommandFrame,
  LogsAckFrame,
  ServerErrorFrame,
  OpenTunnelFrame,
  OpenExecFrame,
  OpenArchiveFrame,
  RetiredFrame,
]);
export type ServerFrame = z.infer<typeof ServerFrame>;

/** Parses one text frame; never throws. */
export function parseFrame<T extends z.ZodType>(schema: T, data: string): { ok: true; frame: z.output<T> } | { ok: false; error: string } {
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return { ok: false, error: "frame is not JSON" };
  }
  const r = schema.safeParse(json);
  return r.success ? { ok: true, frame: r.data } : { ok: false, error: r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") };
}
