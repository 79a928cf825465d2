import type { OperatorNode } from "@cm/sdk";

/** Credits (US cents), as many as two decimals: earnings are counted to the micro-credit. */
export const creditsText = (credits: number) => `${credits.toLocaleString("en-US", { maximumFractionDigits: 2 })} credits`;

/** Credits with their worth in USDC (1 credit = 0.01 USDC), as a payout pays them. */
export const creditsWithUsdc = (credits: number) => `${creditsText(credits)} ($${(credits / 100).toFixed(2)})`;

/** The agent's version and whether to upgrade it, as the API says. */
export function agentText(node: Pick<OperatorNode, "agentVersion" | "agentUpdate">): string {
  if (node.agentVersion === null) return "no agent has connected yet";
  if (node.agentUpdate === "required") return `${node.agentVersion} (upgrade required)`;
  if (node.agentUpdate === "recommended") return `${node.agentVersion} (upgrade recommended)`;
  return node.agentVersion;
}

/** Uptime over the API's three windows: "99.8% (24 h) · 97.1% (7 d) · 97.1% (30 d)". */
export const uptimeText = (u: OperatorNode["uptime"]) => `${u.last24h}% (24 h) · ${u.last7d}% (7 d) · ${u.last30d}% (30 d)`;

/** When, in the reader's own time zone; "never" for null. */
export const whenText = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : "never");
