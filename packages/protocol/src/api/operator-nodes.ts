import { z } from "zod";
import { nameText, Pagination, pageQuery, Timestamp } from "./common";
import { DeploymentStatus } from "./deployments";
import { CreateNodeRequest, OperatorNode } from "./nodes";

/** What an operator may change on a node they run: the fields it was registered with, validated as registration does. */
export const UpdateNodeRequest = CreateNodeRequest.partial().meta({
  description:
    "Only the fields given change (an empty object changes nothing). hourlyRateCents applies to deployments created after it: each deployment keeps the rate it was created with (its hourlyRateCents). Lowering maxDeployments below what runs stops nothing; the node takes no new deployment until fewer run.",
});
export type UpdateNodeRequest = z.infer<typeof UpdateNodeRequest>;
export const OperatorNodeResponse = z.object({ node: OperatorNode });

/** The most a maintenance reason holds: a sentence or two, shown to tenants beside the node. */
export const MAINTENANCE_REASON_MAX = 500;
/** The reason a node is shown with when its operator gave none. */
export const DEFAULT_MAINTENANCE_REASON = "maintenance by its operator";

export const MaintenanceRequest = z.strictObject({
  enabled: z.boolean().meta({ description: "true puts the node in maintenance; false takes it out, back to online or offline as its heartbeats say" }),
  reason: nameText(MAINTENANCE_REASON_MAX)
    .optional()
    .meta({
      description: `what tenants are shown (maintenanceReason) while it lasts; "${DEFAULT_MAINTENANCE_REASON}" when left out; ignored with enabled false`,
    }),
});
export type MaintenanceRequest = z.infer<typeof MaintenanceRequest>;

/** A deployment as its node's operator sees it: what runs and what it earned, never the tenant's env, command or endpoints. */
export const OperatorNodeDeployment = z
  .object({
    id: z.string(),
    status: DeploymentStatus,
    image: z.string(),
    ports: z.array(z.number().int()).meta({ description: "container ports served as HTTP endpoints through the gateway" }),
    tcpPorts: z.array(z.number().int()).meta({ description: "container ports reached as raw TCP through the control plane (cm port-forward)" }),
    gpuCount: z.number().int(),
    cpuCores: z.number(),
    memoryMb: z.number().int(),
    hourlyRateCents: z.number().int().meta({ description: "the rate fixed on the deployment when it was created, whatever the node's rate is now" }),
    earned: z.number().meta({ description: "credits this deployment has earned you so far: your part of its usage charges, less refunds" }),
    createdAt: Timestamp,
    startedAt: Timestamp.nullable().meta({ description: "when it last started running; null if it never has" }),
    stoppedAt: Timestamp.nullable(),
  })
  .meta({ id: "OperatorNodeDeployment" });
export type OperatorNodeDeployment = z.infer<typeof OperatorNodeDeployment>;

export const OperatorNodeDeploymentListQuery = z.strictObject({ status: DeploymentStatus.optional(), ...pageQuery(100) });
export const OperatorNodeDeploymentListResponse = z.object({ deployments: z.array(OperatorNodeDeployment), pagination: Pagination });
