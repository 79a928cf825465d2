import type { DeploymentStatus } from "@cm/sdk";
import "./deployment-status.css";

type Exhaustive<Union, List extends readonly Union[]> = [Exclude<Union, List[number]>] extends [never] ? List : never;

/** Every status a deployment can have, in the order it lives through them (the typecheck fails if the API adds one). */
const statuses = ["pending", "pulling", "starting", "running", "stopping", "stopped", "exited", "failed"] as const;
export const DEPLOYMENT_STATUSES: Exhaustive<DeploymentStatus, typeof statuses> = statuses;

/** The badge's colour class: under way, running, over, or failed. The word is always shown too. */
const TONE: Record<DeploymentStatus, string> = {
  pending: "dep-busy",
  pulling: "dep-busy",
  starting: "dep-busy",
  running: "dep-running",
  stopping: "dep-busy",
  stopped: "dep-ended",
  exited: "dep-ended",
  failed: "dep-failed",
};

/** A deployment's status as a word and a colour (colour is not the only sign). */
export function DeploymentStatusBadge({ status }: { status: DeploymentStatus }) {
  return <span className={`badge dep-status ${TONE[status]}`}>{status}</span>;
}

/** Credits are US cents: "$0.36" for 36 credits, with fractions of a cent kept to four places while metering adds them. */
export function creditsAsDollars(credits: number): string {
  const dollars = credits / 100;
  return `$${dollars < 1 && dollars > 0 ? dollars.toFixed(4).replace(/0{1,2}$/, "") : dollars.toFixed(2)}`;
}
