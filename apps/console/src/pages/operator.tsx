import { useApi } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { AddNode } from "../components/add-node";
import { GpuBadges, StatusBadge } from "../components/badges";
import { dollarsPerHour } from "../components/format";
import { OperatorEarnings } from "../components/operator-earnings";
import { agentText, uptimeText, whenText } from "../components/operator-format";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import "./operator.css";

/** How often the nodes' status is read again: a node that comes online shows within this. */
const NODES_POLL_MS = 3_000;

function Operator() {
  const api = useApi();
  const nodes = useApiCall(() => api.operator.nodes(), "operator-nodes", { pollMs: NODES_POLL_MS });
  const list = nodes.data?.nodes;
  return (
    <>
      <h1>Operator</h1>
      <p>The GPU servers you run for tenants, what they earned, and your payouts.</p>

      <section aria-labelledby="nodes-title">
        <h2 id="nodes-title">Your nodes</h2>
        <ErrorNotice error={nodes.error} onRetry={nodes.reload} />
        {!list && nodes.loading && <Loading label="Loading your nodes…" />}
        {list && list.length === 0 && <p>You operate no nodes yet: add one below.</p>}
        {list && list.length > 0 && (
          <ul className="cards operator-nodes">
            {list.map((n) => (
              <li key={n.id} data-node-id={n.id} className="operator-node">
                <div className="node-head">
                  <h3>
                    <Link to={`/operator/nodes/${n.id}`}>{n.name}</Link>
                  </h3>
                  <StatusBadge status={n.status} />
                </div>
                {n.maintenanceReason !== null && <p className="maintenance-reason">Maintenance: {n.maintenanceReason}</p>}
                <p>
                  <GpuBadges gpus={n.gpus} />
                </p>
                <dl className="node-facts">
                  <dt>Price</dt>
                  <dd>{dollarsPerHour(n.hourlyRateCents)} per GPU</dd>
                  <dt>Deployments</dt>
                  <dd>
                    {n.activeDeployments} of {n.maxDeployments}
                  </dd>
                  <dt>Agent</dt>
                  <dd>{agentText(n)}</dd>
                  <dt>Uptime</dt>
                  <dd>{uptimeText(n.uptime)}</dd>
                  <dt>Last heard</dt>
                  <dd>{whenText(n.lastHeartbeat)}</dd>
                  <dt>Region</dt>
                  <dd>
                    {n.region} ({n.country})
                  </dd>
                </dl>
                <Link to={`/operator/nodes/${n.id}`} className="button secondary" aria-label={`Manage ${n.name}`}>
                  Manage
                </Link>
              </li>
            ))}
          </ul>
        )}
      </section>

      <AddNode nodes={list} onAdded={nodes.reload} />
      <OperatorEarnings />
    </>
  );
}

export const page: PageDefinition = { path: "/operator", title: "Operator", nav: 60, signedIn: true, component: Operator };
