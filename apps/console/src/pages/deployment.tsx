import { type Deployment, hasEnded } from "@cm/sdk";
import { DeploymentActions } from "../components/deployment-actions";
import { DeploymentEndpoints } from "../components/deployment-endpoints";
import { type TimelineStep, useDeploymentLive } from "../components/deployment-live";
import { DeploymentLogs } from "../components/deployment-logs";
import { DeploymentTerminal } from "../components/deployment-terminal";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import { navigate } from "../router/router";
import "./deployment.css";

/** Credits are US cents: "$1.23". */
const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`;

const time = (iso: string) => new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });

export function DeploymentStatusBadge({ status }: { status: Deployment["status"] }) {
  return <span className={`badge dstatus dstatus-${status}`}>{status}</span>;
}

/** Why it is where it is, plainly: the API's statusReason, and the exit code of a container that ended. */
function reasonOf(d: Pick<Deployment, "status" | "statusReason" | "exitCode">): string | undefined {
  // The exit code, unless the reason already says it ("the container exited with code 3").
  const code = d.exitCode !== null && hasEnded(d.status) && !d.statusReason?.includes(`code ${d.exitCode}`) ? `exit code ${d.exitCode}` : undefined;
  const parts = [d.statusReason ?? undefined, code].filter(Boolean);
  return parts.length ? parts.join(", ") : undefined;
}

function Timeline({ steps }: { steps: TimelineStep[] }) {
  return (
    <section aria-labelledby="timeline-heading">
      <h2 id="timeline-heading">Status timeline</h2>
      <ol className="timeline">
        {steps.map((s, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: steps are only appended, so an index names the same step each render
          <li key={i} className={`timeline-step dstatus-line-${s.status}`}>
            <span className="timeline-status">{s.status === "created" ? "created" : <DeploymentStatusBadge status={s.status} />}</span>
            <time dateTime={s.at}>{time(s.at)}</time>
            {s.status !== "created" && reasonOf({ status: s.status, statusReason: s.reason, exitCode: s.exitCode }) && (
              <span className="timeline-reason">{reasonOf({ status: s.status, statusReason: s.reason, exitCode: s.exitCode })}</span>
            )}
          </li>
        ))}
      </ol>
      <p className="muted small">Changes are shown as they happen while this page is open; earlier ones by their times.</p>
    </section>
  );
}

function DeploymentPage({ params }: { params: Record<string, string> }) {
  const id = params.id ?? "";
  const { deployment: d, timeline, error, gone, update } = useDeploymentLive(id);

  if (gone)
    return (
      <>
        <h1>Deployment {id}</h1>
        <p role="status">This deployment was deleted, or it is not yours.</p>
        <p>
          <Link to="/deployments">Back to your deployments</Link>
        </p>
      </>
    );
  if (!d)
    return (
      <>
        <h1>Deployment {id}</h1>
        <ErrorNotice error={error} />
        {!error && <Loading label="Loading the deployment…" />}
      </>
    );

  const reason = reasonOf(d);
  const failed = d.status === "failed" || (d.status === "exited" && d.exitCode !== 0);
  return (
    <div className="deployment-page">
      <p className="crumbs">
        <Link to="/deployments">Deployments</Link>
      </p>
      <h1>{d.name ?? d.id}</h1>
      <div className="deployment-summary">
        <p className="deployment-status" aria-live="polite">
          Status: <DeploymentStatusBadge status={d.status} />
        </p>
        {reason && (
          <p className={failed ? "deployment-reason failed" : "deployment-reason"} role={failed ? "alert" : undefined}>
            {failed ? "Why it failed: " : "Reason: "}
            {reason}
          </p>
        )}
        <dl className="deployment-facts">
          <dt>Cost so far</dt>
          <dd>{dollars(d.totalCost)}</dd>
          <dt>Rate</dt>
          <dd>{dollars(d.hourlyRateCents)}/h while running</dd>
          <dt>Image</dt>
          <dd>
            <code>{d.image}</code>
          </dd>
          <dt>Node</dt>
          <dd>
            <code>{d.nodeId}</code>
          </dd>
          <dt>Resources</dt>
          <dd>
            {d.gpuCount > 0 ? `${d.gpuCount} GPU · ` : ""}
            {d.cpuCores} CPU · {d.memoryMb} MB{d.diskGb !== null ? ` · ${d.diskGb} GB disk` : ""}
          </dd>
          <dt>Id</dt>
          <dd>
            <code>{d.id}</code>
          </dd>
        </dl>
      </div>
      <ErrorNotice error={error} />
      <DeploymentActions deployment={d} onChanged={update} onDeleted={() => navigate("/deployments")} />
      <div className="deployment-columns">
        <Timeline steps={timeline} />
        <DeploymentEndpoints deployment={d} />
      </div>
      <DeploymentLogs id={d.id} live={!hasEnded(d.status)} />
      <DeploymentTerminal id={d.id} running={d.status === "running"} />
    </div>
  );
}

export const page: PageDefinition = { path: "/deployments/:id", title: "Deployment", signedIn: true, component: DeploymentPage };
