import { Link } from "../router/link";

/** The API's refusal (an estimate's, or create's error): its code, message and details. */
export interface Refusal {
  code: string;
  message: string;
  details?: unknown;
}

/** Each reason NO_NODE_FITS counts nodes by (details.reasons), in the tenant's words. */
const REASONS: Record<string, string> = {
  region: "in another region",
  maxHourlyRate: "over your maximum price",
  gpuModel: "without that GPU model",
  minGpuVram: "without a GPU with that much memory",
  NODE_NO_GPU: "without a GPU (the template needs one)",
  NODE_INSUFFICIENT_GPU_VRAM: "with GPUs too small for the template",
  NODE_INSUFFICIENT_GPUS: "with fewer GPUs than asked",
  NODE_INSUFFICIENT_CPU: "with fewer CPU cores than it needs",
  NODE_INSUFFICIENT_RAM: "with less memory than it needs",
  NODE_INSUFFICIENT_FREE_GPUS: "without enough free GPUs",
  NODE_INSUFFICIENT_FREE_CPU: "without enough free CPU cores",
  NODE_INSUFFICIENT_FREE_RAM: "without enough free memory",
  NODE_INSUFFICIENT_DISK: "with a smaller disk than it needs",
  NODE_INSUFFICIENT_FREE_DISK: "without enough free disk",
  NODE_AT_CAPACITY: "already running as many deployments as they take",
  IMAGE_HAS_NO_COMMAND: "holding the image with no command (give one)",
  NODE_IN_MAINTENANCE: "in maintenance",
  NODE_OFFLINE: "gone offline meanwhile",
  untried: "not tried (others were taken meanwhile: try again)",
};

/** What to do next, by code; the API's message says what is wrong. */
const NEXT: Record<string, string> = {
  NO_NODE_FITS: "Loosen a requirement (region, price, GPU model or memory, GPU count, resources), or pick a node from the catalogue.",
  NODE_INSUFFICIENT_FREE_GPUS: "Ask for fewer GPUs, or pick another node.",
  NODE_INSUFFICIENT_FREE_CPU: "Ask for fewer CPU cores, or pick another node.",
  NODE_INSUFFICIENT_FREE_RAM: "Ask for less memory, or pick another node.",
  NODE_AT_CAPACITY: "Pick another node, or let the cheapest node that fits be chosen.",
  NODE_OFFLINE: "Pick another node, or wait for this one to come back online.",
  NODE_IN_MAINTENANCE: "Pick another node: its operator paused this one.",
  IMAGE_HAS_NO_COMMAND: "Give a command for the image.",
};

function reasonCounts(details: unknown): Array<[string, number]> {
  const reasons = (details as { reasons?: unknown } | undefined)?.reasons;
  if (!reasons || typeof reasons !== "object") return [];
  return Object.entries(reasons as Record<string, unknown>).filter((e): e is [string, number] => typeof e[1] === "number");
}

/**
 * Why the deployment would not (or did not) go ahead, and what to do: NO_NODE_FITS lists how many
 * online nodes each reason ruled out; INSUFFICIENT_CREDITS links to the Credits page.
 */
export function PlacementRefusal({ refusal, live }: { refusal: Refusal; live?: boolean }) {
  const counts = refusal.code === "NO_NODE_FITS" ? reasonCounts(refusal.details) : [];
  const online = (refusal.details as { online?: unknown } | undefined)?.online;
  return (
    <div className="refusal" role={live ? "status" : "alert"} data-code={refusal.code}>
      <p className="refusal-message">
        {refusal.message} <code>{refusal.code}</code>
      </p>
      {counts.length > 0 && (
        <>
          <p>
            {typeof online === "number"
              ? `Of the ${online} online ${online === 1 ? "node" : "nodes"}, how many each reason rules out:`
              : "How many online nodes each reason rules out:"}
          </p>
          <ul className="refusal-reasons" aria-label="Why no node fits">
            {counts.map(([reason, n]) => (
              <li key={reason}>
                {n} {n === 1 ? "node" : "nodes"} {REASONS[reason] ?? `refused it (${reason})`}
              </li>
            ))}
          </ul>
        </>
      )}
      {refusal.code === "INSUFFICIENT_CREDITS" ? (
        <p>
          <Link to="/credits" className="button">
            Buy credits
          </Link>{" "}
          then come back and deploy.
        </p>
      ) : (
        NEXT[refusal.code] && <p className="refusal-next">{NEXT[refusal.code]}</p>
      )}
    </div>
  );
}
