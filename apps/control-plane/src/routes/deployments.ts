import {
  CreateDeploymentRequest, CreateDeploymentResponse, DeleteDeploymentResponse, DeploymentActionResponse, DeploymentListQuery,
  DeploymentListResponse, DeploymentResponse, LogsQuery, LogsResponse, paginate,
} from "@cm/protocol";
import { param, type ApiRouter } from "../http/api-router";
import { presentDeployment } from "../http/presenters";
import type { Deps } from "../deps";

export function deploymentRoutes(api: ApiRouter, deps: Deps) {
  const tag = "deployments";
  const svc = deps.deployments;
  const present = (d: Parameters<typeof presentDeployment>[0]) => presentDeployment(d, deps.gateway());

  api.post(
    "/deployments",
    {
      tag, auth: true, status: 201, summary: "Create a deployment",
      description: "Exactly one of templateId and customImage. Holds one hour of the node's rate from your available credits while it is live.",
      body: CreateDeploymentRequest, response: CreateDeploymentResponse,
      errors: ["TEMPLATE_OR_IMAGE_REQUIRED", "TEMPLATE_AND_IMAGE_CONFLICT", "TEMPLATE_NOT_FOUND", "NODE_NOT_FOUND", "NODE_OFFLINE", "NODE_AT_CAPACITY", "NODE_NO_GPU", "NODE_INSUFFICIENT_GPU_VRAM", "NODE_INSUFFICIENT_CPU", "NODE_INSUFFICIENT_RAM", "INSUFFICIENT_CREDITS"],
    },
    async (c, { body }) => {
      const { deployment, estimatedHourlyCost } = await svc.create(c.get("user").id, body);
      return c.json({ deployment: present(deployment), estimatedHourlyCost }, 201);
    },
  );

  api.get("/deployments", { tag, auth: true, summary: "Your deployments, newest first", query: DeploymentListQuery, response: DeploymentListResponse }, async (c, { query }) => {
    const { rows, total } = await deps.repos.deployments.list({ userId: c.get("user").id, status: query.status, page: query.page, limit: query.limit });
    return c.json({ deployments: rows.map(present), pagination: paginate(query.page, query.limit, total) });
  });

  api.get("/deployments/:id", { tag, auth: true, summary: "One deployment", response: DeploymentResponse, errors: ["DEPLOYMENT_NOT_FOUND"] }, async (c) =>
    c.json({ deployment: present(await svc.mine(param(c, "id"), c.get("user").id)) }),
  );

  api.post("/deployments/:id/start", { tag, auth: true, summary: "Start a stopped, exited or failed deployment", response: DeploymentActionResponse, errors: ["DEPLOYMENT_NOT_FOUND", "INVALID_STATE_TRANSITION", "NODE_OFFLINE", "NODE_AT_CAPACITY", "INSUFFICIENT_CREDITS"] }, async (c) =>
    c.json({ deployment: present(await svc.start(param(c, "id"), c.get("user").id)) }),
  );

  api.post("/deployments/:id/stop", { tag, auth: true, summary: "Stop a live deployment", response: DeploymentActionResponse, errors: ["DEPLOYMENT_NOT_FOUND", "INVALID_STATE_TRANSITION"] }, async (c) =>
    c.json({ deployment: present(await svc.stop(param(c, "id"), c.get("user").id)) }),
  );

  api.delete("/deployments/:id", { tag, auth: true, summary: "Delete a deployment (stopping it first)", response: DeleteDeploymentResponse, errors: ["DEPLOYMENT_NOT_FOUND"] }, async (c) => {
    const d = await svc.remove(param(c, "id"), c.get("user").id);
    return c.json({ success: true, message: `deployment ${d.id} deleted` });
  });

  api.get(
    "/deployments/:id/logs",
    { tag, auth: true, summary: "A deployment's log lines, oldest first", description: "tail: the last n lines (default 100, max 10,000). since: only lines at or after this time. The last 10,000 lines of each deployment are kept.", query: LogsQuery, response: LogsResponse, errors: ["DEPLOYMENT_NOT_FOUND"] },
    async (c, { query }) => {
      const dep = await svc.mine(param(c, "id"), c.get("user").id);
      const rows = await deps.repos.logs.tail(dep.id, query.tail, query.since ? Date.parse(query.since) : undefined);
      return c.json({ logs: rows.map((r) => ({ timestamp: r.ts, stream: r.stream as "stdout" | "stderr", message: r.message })) });
    },
  );
}
