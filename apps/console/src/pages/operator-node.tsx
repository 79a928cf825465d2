import type { OperatorNode } from "@cm/sdk";
import { type FormEvent, useState } from "react";
import { useApi } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { GpuBadges, StatusBadge } from "../components/badges";
import { dollarsPerHour, gigabytes } from "../components/format";
import { Labelled } from "../components/labelled";
import { agentText, creditsText, uptimeText, whenText } from "../components/operator-format";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import "./operator.css";

/** One node its operator runs: its state (polled), maintenance, price, and what runs there. */
function OperatorNodePage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const api = useApi();
  // The API lists an operator's nodes, not one: the list is small (at most MAX_NODES_PER_ACCOUNT).
  const nodes = useApiCall(() => api.operator.nodes(), `operator-nodes`, { pollMs: 3_000 });
  const deployments = useApiCall(() => api.operator.nodeDeployments(id, { limit: 50 }), `node-deployments:${id}`, { pollMs: 5_000 });
  const node = nodes.data?.nodes.find((n) => n.id === id);

  return (
    <>
      <p>
        <Link to="/operator">← All your nodes</Link>
      </p>
      <ErrorNotice error={nodes.error} onRetry={nodes.reload} />
      {!nodes.data && nodes.loading && <Loading label="Loading the node…" />}
      {nodes.data && !node && (
        <>
          <h1>Node not found</h1>
          <p>
            You operate no node {id}. <Link to="/operator">See the nodes you operate.</Link>
          </p>
        </>
      )}
      {node && (
        <>
          <div className="node-head">
            <h1>{node.name}</h1>
            <StatusBadge status={node.status} />
          </div>
          {node.maintenanceReason !== null && (
            <p className="maintenance-reason">
              In maintenance since {whenText(node.maintenanceSince)}: {node.maintenanceReason}. It takes no new deployments; what runs there goes on.
            </p>
          )}
          <p>
            <GpuBadges gpus={node.gpus} />
          </p>
          <dl className="node-facts">
            <dt>Id</dt>
            <dd>
              <code>{node.id}</code>
            </dd>
            <dt>Price</dt>
            <dd>{dollarsPerHour(node.hourlyRateCents)} per GPU</dd>
            <dt>Deployments</dt>
            <dd>
              {node.activeDeployments} of {node.maxDeployments}
            </dd>
            <dt>Agent</dt>
            <dd>{agentText(node)}</dd>
            <dt>Uptime</dt>
            <dd>{uptimeText(node.uptime)}</dd>
            <dt>Last heard</dt>
            <dd>{whenText(node.lastHeartbeat)}</dd>
            <dt>Machine</dt>
            <dd>
              {node.specs.cpuCores} cores ({node.specs.cpuModel || "CPU"}), {gigabytes(node.specs.ramMb)} RAM, {node.specs.diskGb} GB disk
            </dd>
            <dt>Region</dt>
            <dd>
              {node.region} ({node.country})
            </dd>
          </dl>
          <div className="operator-controls">
            <Maintenance node={node} onChange={nodes.reload} />
            <Price node={node} onChange={nodes.reload} />
          </div>
        </>
      )}

      <section aria-labelledby="runs-title">
        <h2 id="runs-title">What runs here</h2>
        <ErrorNotice error={deployments.error} onRetry={deployments.reload} />
        {!deployments.data && deployments.loading && <Loading label="Loading its deployments…" />}
        {deployments.data && deployments.data.deployments.length === 0 && <p>Nothing is on this node.</p>}
        {deployments.data && deployments.data.deployments.length > 0 && (
          <div className="table-scroll">
            <table>
              <thead>
                <tr>
                  <th scope="col">Deployment</th>
                  <th scope="col">Status</th>
                  <th scope="col">Image</th>
                  <th scope="col">GPUs</th>
                  <th scope="col">Rate</th>
                  <th scope="col">Earned</th>
                  <th scope="col">Started</th>
                </tr>
              </thead>
              <tbody>
                {deployments.data.deployments.map((d) => (
                  <tr key={d.id}>
                    <td>
                      <code>{d.id}</code>
                    </td>
                    <td>{d.status}</td>
                    <td className="wrap">{d.image}</td>
                    <td>{d.gpuCount}</td>
                    <td>{dollarsPerHour(d.hourlyRateCents)}</td>
                    <td>{creditsText(d.earned)}</td>
                    <td>{whenText(d.startedAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </>
  );
}

/** Runs an action, keeping its error and a word of progress for the form that started it. */
function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<string>();
  const run = async (action: () => Promise<string>) => {
    setBusy(true);
    setError(undefined);
    setDone(undefined);
    try {
      setDone(await action());
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, done, run };
}

function Maintenance({ node, onChange }: { node: OperatorNode; onChange: () => void }) {
  const api = useApi();
  const [reason, setReason] = useState("");
  const action = useAction();
  const inMaintenance = node.status === "maintenance";
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      await api.operator.setMaintenance(node.id, inMaintenance ? { enabled: false } : { enabled: true, ...(reason.trim() ? { reason: reason.trim() } : {}) });
      onChange();
      setReason("");
      return inMaintenance
        ? "Maintenance ended: it takes deployments again while its agent is connected."
        : "In maintenance: it takes no new deployments, and what runs there goes on.";
    });
  };
  return (
    <form className="operator-form" aria-labelledby="maintenance-title" onSubmit={submit}>
      <h2 id="maintenance-title">Maintenance</h2>
      {!inMaintenance && (
        <Labelled label="Reason shown to tenants (optional)">
          {(id) => <input id={id} maxLength={500} value={reason} onChange={(e) => setReason(e.target.value)} />}
        </Labelled>
      )}
      <button type="submit" className="button" disabled={action.busy}>
        {action.busy ? "Saving…" : inMaintenance ? "End maintenance" : "Start maintenance"}
      </button>
      <ErrorNotice error={action.error} />
      {action.done && <p role="status">{action.done}</p>}
    </form>
  );
}

function Price({ node, onChange }: { node: OperatorNode; onChange: () => void }) {
  const api = useApi();
  const [rate, setRate] = useState(String(node.hourlyRateCents));
  const action = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      const changed = await api.operator.updateNode(node.id, { hourlyRateCents: Number(rate) });
      onChange();
      return `Now ${dollarsPerHour(changed.hourlyRateCents)} per GPU for deployments created from now on; running ones keep their rate.`;
    });
  };
  return (
    <form className="operator-form" aria-labelledby="price-title" onSubmit={submit}>
      <h2 id="price-title">Price</h2>
      <Labelled label="Price (credits per GPU-hour)" hint="1 credit = 1 US cent; a CPU-only deployment pays it once an hour.">
        {(id, hint) => (
          <input
            id={id}
            aria-describedby={hint}
            type="number"
            required
            min={0}
            max={1_000_000}
            step={1}
            value={rate}
            onChange={(e) => setRate(e.target.value)}
          />
        )}
      </Labelled>
      <button type="submit" className="button" disabled={action.busy}>
        {action.busy ? "Saving…" : "Change price"}
      </button>
      <ErrorNotice error={action.error} />
      {action.done && <p role="status">{action.done}</p>}
    </form>
  );
}

export const page: PageDefinition = { path: "/operator/nodes/:id", title: "Node", signedIn: true, component: OperatorNodePage };
