import {
  CreateDeploymentRequest,
  CreateDeploymentResponse,
  DeleteDeploymentResponse,
  DeploymentActionResponse,
  DeploymentEstimateResponse,
  DeploymentEventsHeaders,
  DeploymentListQuery,
  DeploymentListResponse,
  DeploymentResponse,
  LOG_LINES_KEPT,
  LOG_READ_MAX_BYTES,
  LOG_STREAM_KEEP_ALIVE_MS,
  LogEntry,
  LogStreamEnd,
  LogStreamHeaders,
  LogsQuery,
  LogsResponse,
  PLACEMENT_MAX_TRIES,
  paginate,
} from "@cm/protocol";
import { z } from "zod";
import type { Deps } from "../deps";
import { deploymentViews } from "../http/deployment-views";
import { createRouter, IdParams, json, jsonBody, type RouteFactory } from "../http/route";
import { presentOncePerRow, streamDeploymentEvents } from "./deployment-events";
import { LOG_STREAM_PAGE_BYTES, LOG_STREAM_PAGE_LINES, streamLogs } from "./log-stream";

/** What both streams say of who may hold them and for how long, with this installation's numbers. */
const streamBounds = (config: Deps["config"]) =>
  `A stream lasts as long as the sign-in that opened it: signing out (POST /auth/logout) or a revocation of the token's family (a refresh token used twice) ends it with \`event: error\` (data: the API's error shape, UNAUTHORIZED), then the end, at once on the replica that revoked it and within ${config.REVOCATION_CHECK_MS / 1000} s on another (REVOCATION_CHECK_MS); the expiry of the access token it was opened with ends it the same way with TOKEN_EXPIRED: refresh the token and reconnect with Last-Event-ID (the SDK does). One account may hold ${config.MAX_STREAMS_PER_ACCOUNT} streams open at once (MAX_STREAMS_PER_ACCOUNT) and one deployment ${config.MAX_STREAMS_PER_DEPLOYMENT} (MAX_STREAMS_PER_DEPLOYMENT), log and events streams together, on each replica; past either the request is refused with RATE_LIMITED (429, Retry-After) and a slot is free again as soon as a stream closes.`;

/** Your deployments; mounted at /deployments. Every route needs a bearer token. */
export function deploymentRoutes(deps: Deps, route: RouteFactory) {
  const tags = ["deployments"];
  const svc = deps.deployments;
  const views = deploymentViews(deps);
  const presentEvent = presentOncePerRow(views.one);
  const present = views.one;

  return createRouter()
    .openapi(
      route(
        {
          method: "post",
          path: "/",
          operationId: "createDeployment",
          tags,
          summary: "Create a deployment",
          description:
            "Exactly one of templateId and customImage. The deployment holds gpuCount of the node's GPUs (no other deployment gets them) and its cpuCores and memoryMb of the node's while it is live; a node takes it only while all fit and it is below maxDeployments, else the refusal names what is short. Its rate, fixed now, is the node's hourlyRateCents per GPU (once for no GPU); one hour of it is held from your available credits while it is live.\n\n" +
            `Without nodeId the control plane places it: of the online nodes that meet region, maxHourlyRate, gpuModel and minGpuVram (as GET /nodes filters), the template's minimums and have room now for gpuCount, cpuCores and memoryMb, the cheapest (ties: most free GPUs, then id). When a parallel create took that room first, it tries the next, ${PLACEMENT_MAX_TRIES} nodes at most. When none fits: NO_NODE_FITS, its message counting the online nodes per reason ("12 nodes online: 7 lack 2 free GPUs, 4 are over your maximum rate, 1 is in another region"), details { online, reasons: { <reason>: count } }. POST /deployments/estimate answers the same without creating anything.`,
          request: { body: jsonBody(CreateDeploymentRequest) },
          responses: { 201: json(CreateDeploymentResponse, "The deployment, pending, and what it costs an hour") },
        },
        {
          auth: true,
          errors: [
            "TEMPLATE_OR_IMAGE_REQUIRED",
            "TEMPLATE_AND_IMAGE_CONFLICT",
            "RESTART_POLICY_CONFLICT",
            "IMAGE_HAS_NO_COMMAND",
            "TEMPLATE_NOT_FOUND",
            "REGISTRY_CREDENTIAL_NOT_FOUND",
            "REGISTRY_CREDENTIAL_MISMATCH",
            "NODE_NOT_FOUND",
            "NODE_OFFLINE",
            "NODE_IN_MAINTENANCE",
            "NODE_AT_CAPACITY",
            "NODE_NO_GPU",
            "NODE_INSUFFICIENT_GPU_VRAM",
            "NODE_INSUFFICIENT_CPU",
            "NODE_INSUFFICIENT_RAM",
            "NODE_INSUFFICIENT_GPUS",
            "NODE_INSUFFICIENT_DISK",
            "NODE_INSUFFICIENT_FREE_GPUS",
            "NODE_INSUFFICIENT_FREE_CPU",
            "NODE_INSUFFICIENT_FREE_RAM",
            "NODE_INSUFFICIENT_FREE_DISK",
            "NO_NODE_FITS",
            "INSUFFICIENT_CREDITS",
          ],
        },
      ),
      async (c) => {
        const { deployment, estimatedHourlyCost } = await svc.create(c.get("user").id, c.req.valid("json"));
        return c.json({ deployment: await present(deployment), estimatedHourlyCost }, 201);
      },
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/estimate",
          operationId: "estimateDeployment",
          tags,
          summary: "What creating this deployment would do now, without creating it",
          description:
            "Takes POST /deployments's body and answers, creating nothing and holding nothing: the node it would run on (nodeId as given, or the one placement picks), its hourly rate, the credits it would hold (one hour of that rate, as create holds), what it would hold of the node (gpuCount, cpuCores, memoryMb, diskGb) and whether it fits now. When it does not, fits is false and refusal is the error create would answer now, the same code, message and details (NODE_INSUFFICIENT_FREE_GPUS, NO_NODE_FITS with its counts per reason, INSUFFICIENT_CREDITS...). It is advice: another create may take the room or the credits before yours. A request that is wrong whatever the nodes (no template or image, an unknown template or nodeId) answers its error as create does.",
          request: { body: jsonBody(CreateDeploymentRequest) },
          responses: { 200: json(DeploymentEstimateResponse, "The estimate") },
        },
        {
          auth: true,
          errors: [
            "TEMPLATE_OR_IMAGE_REQUIRED",
            "TEMPLATE_AND_IMAGE_CONFLICT",
            "RESTART_POLICY_CONFLICT",
            "TEMPLATE_NOT_FOUND",
            "REGISTRY_CREDENTIAL_NOT_FOUND",
            "REGISTRY_CREDENTIAL_MISMATCH",
            "NODE_NOT_FOUND",
          ],
        },
      ),
      async (c) => c.json(await svc.estimate(c.get("user").id, c.req.valid("json")), 200),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/",
          operationId: "listDeployments",
          tags,
          summary: "Your deployments, newest first",
          description: "Deleted deployments are left out; status filters by one status.",
          request: { query: DeploymentListQuery },
          responses: { 200: json(DeploymentListResponse, "A page of your deployments") },
        },
        { auth: true },
      ),
      async (c) => {
        const query = c.req.valid("query");
        const { rows, total } = await deps.repos.deployments.list({ userId: c.get("user").id, status: query.status, page: query.page, limit: query.limit });
        return c.json({ deployments: await views.many(rows), pagination: paginate(query.page, query.limit, total) }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/{id}",
          operationId: "getDeployment",
          tags,
          summary: "One deployment",
          description: "Only your own: another account's deployment id answers DEPLOYMENT_NOT_FOUND.",
          request: { params: IdParams },
          responses: { 200: json(DeploymentResponse, "The deployment") },
        },
        { auth: true, errors: ["DEPLOYMENT_NOT_FOUND"] },
      ),
      async (c) => c.json({ deployment: await present(await svc.mine(c.req.valid("param").id, c.get("user").id)) }, 200),
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/{id}/start",
          operationId: "startDeployment",
          tags,
          summary: "Start a stopped, exited or failed deployment",
          description:
            "Holds its GPUs, CPU, memory and disk on the node and an hour of its rate again, as at creation, and starts a new run. From any other status: INVALID_STATE_TRANSITION, details.currentStatus saying which.",
          request: { params: IdParams },
          responses: { 200: json(DeploymentActionResponse, "The deployment, starting") },
        },
        {
          auth: true,
          errors: [
            "DEPLOYMENT_NOT_FOUND",
            "INVALID_STATE_TRANSITION",
            "NODE_OFFLINE",
            "NODE_IN_MAINTENANCE",
            "NODE_AT_CAPACITY",
            "NODE_INSUFFICIENT_FREE_GPUS",
            "NODE_INSUFFICIENT_FREE_CPU",
            "NODE_INSUFFICIENT_FREE_RAM",
            "NODE_INSUFFICIENT_FREE_DISK",
            "INSUFFICIENT_CREDITS",
          ],
        },
      ),
      async (c) => c.json({ deployment: await present(await svc.start(c.req.valid("param").id, c.get("user").id)) }, 200),
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/{id}/stop",
          operationId: "stopDeployment",
          tags,
          summary: "Stop a live deployment",
          description:
            "From pending, pulling, starting or running: stopping while the node's agent stops the container, or stopped at once when the node is not connected.",
          request: { params: IdParams },
          responses: { 200: json(DeploymentActionResponse, "The deployment, stopping") },
        },
        { auth: true, errors: ["DEPLOYMENT_NOT_FOUND", "INVALID_STATE_TRANSITION"] },
      ),
      async (c) => c.json({ deployment: await present(await svc.stop(c.req.valid("param").id, c.get("user").id)) }, 200),
    )
    .openapi(
      route(
        {
          method: "delete",
          path: "/{id}",
          operationId: "deleteDeployment",
          tags,
          summary: "Delete a deployment (stopping it first)",
          description: "From any status. Charges stop at once; the node's agent removes the container, and the deployment no longer appears in your list.",
          request: { params: IdParams },
          responses: { 200: json(DeleteDeploymentResponse, "The deployment is deleted") },
        },
        { auth: true, errors: ["DEPLOYMENT_NOT_FOUND"] },
      ),
      async (c) => {
        const d = await svc.remove(c.req.valid("param").id, c.get("user").id);
        return c.json({ success: true, message: `deployment ${d.id} deleted` }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/{id}/logs",
          operationId: "getDeploymentLogs",
          tags,
          summary: "A deployment's log lines, oldest first",
          description: [
            `tail: the last n lines (default 100, max ${LOG_LINES_KEPT.toLocaleString("en")}). since: only lines at or after this time. The ${LOG_LINES_KEPT.toLocaleString("en")} highest-numbered lines of each deployment are kept, whatever order its node sends them in.`,
            `One answer holds at most ${LOG_READ_MAX_BYTES / 1024 / 1024} MiB of message text (UTF-8): when the lines asked for hold more, it has the newest of them that fit (the newest line always) and \`truncated: true\`. GET /deployments/{id}/logs/stream sends a tail of any size, a page at a time.`,
            "Each line carries its `seq`, the id the stream gives it: poll again with `since` the newest line's timestamp and skip the lines whose `seq` is at or below the highest read, and the poll resumes exactly where the last one ended.",
          ].join("\n\n"),
          request: { params: IdParams, query: LogsQuery },
          responses: { 200: json(LogsResponse, "The log lines") },
        },
        { auth: true, errors: ["DEPLOYMENT_NOT_FOUND"] },
      ),
      async (c) => {
        const query = c.req.valid("query");
        const dep = await svc.mine(c.req.valid("param").id, c.get("user").id);
        const sinceMs = query.since ? Date.parse(query.since) : undefined;
        const { rows, truncated } = await deps.repos.logs.newest(dep.id, { tail: query.tail, maxBytes: LOG_READ_MAX_BYTES, sinceMs });
        return c.json(
          { logs: rows.map((r) => ({ timestamp: r.ts, stream: r.stream as "stdout" | "stderr", message: r.message, seq: r.seq })), truncated },
          200,
        );
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/{id}/logs/stream",
          operationId: "streamDeploymentLogs",
          tags,
          summary: "Follow a deployment's log lines (Server-Sent Events)",
          description: [
            "First the last `tail` lines (and `since`, as GET /deployments/{id}/logs), then each new line as it is stored.",
            "Each line is an event with `id:` its line number and `data:` a LogEntry as JSON. Reconnect with `Last-Event-ID` (EventSource does) to resume after that line, none lost or repeated; with no line yet, a first event with only an `id:` hands the cursor.",
            `The tail and any backlog are sent a page at a time (at most ${LOG_STREAM_PAGE_BYTES / 1024} KiB of text, ${LOG_STREAM_PAGE_LINES.toLocaleString("en")} lines), each once the client has read the one before. A client that reads none of what was sent for ${deps.config.LOG_STREAM_STALL_MS / 1000} s (LOG_STREAM_STALL_MS) has its connection closed: reconnect with Last-Event-ID to resume.`,
            `\`event: end\` (data: LogStreamEnd) once the deployment is stopped, exited, failed or deleted and its last lines are out; then the stream closes. A comment (\`: keep-alive\`) every ${LOG_STREAM_KEEP_ALIVE_MS / 1000} s keeps proxies from closing a quiet stream. A failure on our side is told as \`event: error\` (data: the API's error shape, INTERNAL_ERROR with the request id), then the stream closes: reconnect with Last-Event-ID to resume.`,
            streamBounds(deps.config),
          ].join("\n\n"),
          request: { params: IdParams, query: LogsQuery, headers: LogStreamHeaders },
          responses: {
            200: {
              // The X-Request-Id header as every response; the body is events, not JSON.
              ...json(z.string(), "The stream of log lines"),
              content: {
                "text/event-stream": {
                  schema: z.string().meta({
                    description: `Events: message (data: ${JSON.stringify(z.toJSONSchema(LogEntry))}), end (data: ${JSON.stringify(z.toJSONSchema(LogStreamEnd))})`,
                  }),
                },
              },
            },
          },
        },
        { auth: true, errors: ["DEPLOYMENT_NOT_FOUND", "RATE_LIMITED"] },
      ),
      async (c) => {
        const query = c.req.valid("query");
        const dep = await svc.mine(c.req.valid("param").id, c.get("user").id);
        const lastEventId = c.req.valid("header")["last-event-id"];
        c.set("streamHold", deps.streams.open(c.get("grant"), dep.id));
        return streamLogs(c, deps, dep, { tail: query.tail, sinceMs: query.since ? Date.parse(query.since) : undefined, lastEventId });
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/{id}/events",
          operationId: "streamDeploymentEvents",
          tags,
          summary: "Follow a deployment's changes (Server-Sent Events)",
          description: [
            "First the deployment as GET /deployments/{id} answers it, then the deployment again each time something in it changes: status, statusReason (pull progress included), exitCode, an endpoint becoming ready, totalCost as it is charged.",
            "Each is an event with `id:` a number counting up and `data:` a Deployment as JSON. Changes that come close together may arrive as one event with the newest state. A reconnect gets the current state first again; with `Last-Event-ID` (EventSource sends it) the ids go on from it.",
            `\`event: end\` (data: LogStreamEnd) once the deployment is stopped, exited or failed (after the event showing it) or deleted; then the stream closes. A comment (\`: keep-alive\`) every ${LOG_STREAM_KEEP_ALIVE_MS / 1000} s keeps proxies from closing a quiet stream. A failure on our side is told as \`event: error\` (data: the API's error shape, INTERNAL_ERROR with the request id), then the stream closes: reconnect with Last-Event-ID to resume.`,
            streamBounds(deps.config),
          ].join("\n\n"),
          request: { params: IdParams, headers: DeploymentEventsHeaders },
          responses: {
            200: {
              ...json(z.string(), "The stream of the deployment's states"),
              content: {
                "text/event-stream": {
                  schema: z.string().meta({
                    description: `Events: message (data: a Deployment, #/components/schemas/Deployment), end (data: ${JSON.stringify(z.toJSONSchema(LogStreamEnd))})`,
                  }),
                },
              },
            },
          },
        },
        { auth: true, errors: ["DEPLOYMENT_NOT_FOUND", "RATE_LIMITED"] },
      ),
      async (c) => {
        const dep = await svc.mine(c.req.valid("param").id, c.get("user").id);
        c.set("streamHold", deps.streams.open(c.get("grant"), dep.id));
        return streamDeploymentEvents(c, deps, dep, presentEvent, c.req.valid("header")["last-event-id"]);
      },
    );
}
