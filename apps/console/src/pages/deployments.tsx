import type { Deployment, DeploymentStatus } from "@cm/sdk";
import { useId } from "react";
import { useApi } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { creditsAsDollars, DEPLOYMENT_STATUSES, DeploymentStatusBadge } from "../components/deployment-status";
import { dollarsPerHour } from "../components/format";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import { navigate, useLocation } from "../router/router";
import "./deployments.css";

/** How often the list asks again: a status moves within seconds of the agent's report; cost grows each metering turn. */
const POLL_MS = 3_000;
const PAGE_SIZE = 50;

function Deployments() {
  const api = useApi();
  const { query } = useLocation();
  const raw = query.get("status");
  const status = DEPLOYMENT_STATUSES.find((s) => s === raw);
  const page = Math.max(1, Math.floor(Number(query.get("page")) || 1));
  const filterId = useId();
  const { data, error, loading, reload } = useApiCall(() => api.deployments.list({ status, page, limit: PAGE_SIZE }), `${status}|${page}`, { pollMs: POLL_MS });

  const go = (next: { status?: DeploymentStatus | ""; page?: number }) => {
    const q = new URLSearchParams();
    const s = next.status === undefined ? status : next.status || undefined;
    if (s) q.set("status", s);
    if ((next.page ?? 1) > 1) q.set("page", String(next.page));
    const text = q.toString();
    navigate(`/deployments${text ? `?${text}` : ""}`, { replace: true });
  };

  const p = data?.pagination;
  return (
    <>
      <div className="deployments-head">
        <h1>Deployments</h1>
        <Link to="/deploy" className="button">
          New deployment
        </Link>
      </div>
      <form className="filters" aria-label="Filter deployments" onSubmit={(e) => e.preventDefault()}>
        <div className="field">
          <label htmlFor={filterId}>Status</label>
          <select id={filterId} value={status ?? ""} onChange={(e) => go({ status: e.target.value as DeploymentStatus | "" })}>
            <option value="">Any</option>
            {DEPLOYMENT_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
      </form>
      <ErrorNotice error={error} onRetry={reload} />
      {!data && loading && <Loading label="Loading deployments…" />}
      {data && data.deployments.length === 0 && (
        <p>
          {status ? `No deployment is ${status}.` : "You have no deployments yet."} <Link to="/deploy">Deploy something</Link>.
        </p>
      )}
      {data && data.deployments.length > 0 && (
        <>
          <p className="count">
            {p!.total} {p!.total === 1 ? "deployment" : "deployments"}
            {status ? ` ${status}` : ""}; updated every few seconds.
          </p>
          <ul className="deployment-list" aria-label="Deployments">
            {data.deployments.map((d) => (
              <DeploymentRow key={d.id} d={d} />
            ))}
          </ul>
          {p!.totalPages > 1 && (
            <nav className="pager" aria-label="Pages">
              <button type="button" className="secondary" disabled={page <= 1} onClick={() => go({ page: page - 1 })}>
                Previous
              </button>
              <span>
                Page {p!.page} of {p!.totalPages}
              </span>
              <button type="button" className="secondary" disabled={page >= p!.totalPages} onClick={() => go({ page: page + 1 })}>
                Next
              </button>
            </nav>
          )}
        </>
      )}
    </>
  );
}

function DeploymentRow({ d }: { d: Deployment }) {
  const title = d.name ?? d.id;
  return (
    <li className="deployment-row" data-deployment-id={d.id}>
      <div className="deployment-row-head">
        <h2>
          <Link to={`/deployments/${encodeURIComponent(d.id)}`}>{title}</Link>
        </h2>
        <DeploymentStatusBadge status={d.status} />
      </div>
      {d.statusReason && d.status !== "running" && <p className="deployment-reason">{d.statusReason}</p>}
      <dl className="facts">
        <dt>Image</dt>
        <dd>
          <code>{d.image}</code>
        </dd>
        <dt>Cost so far</dt>
        <dd className="deployment-cost">{creditsAsDollars(d.totalCost)}</dd>
        <dt>Price</dt>
        <dd>{dollarsPerHour(d.hourlyRateCents)}</dd>
        <dt>Node</dt>
        <dd>{d.nodeId}</dd>
        <dt>Created</dt>
        <dd>
          <time dateTime={d.createdAt}>{new Date(d.createdAt).toLocaleString()}</time>
        </dd>
      </dl>
    </li>
  );
}

export const page: PageDefinition = { path: "/deployments", title: "Deployments", nav: 40, signedIn: true, component: Deployments };
