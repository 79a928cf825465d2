/** Short, plain pages for a person who opened an endpoint URL in a browser. */
export type GatewayFailure = "unknown_host" | "not_running" | "node_unreachable" | "port_not_ready" | "timeout";

const TEXT: Record<GatewayFailure, { status: number; title: string; body: string }> = {
  unknown_host: { status: 404, title: "No such endpoint", body: "No deployment answers at this address. Check the URL in your deployment's endpoints." },
  not_running: { status: 404, title: "Deployment not running", body: "This deployment is stopped or was deleted. Start it again to bring this endpoint back." },
  node_unreachable: {
    status: 503,
    title: "Node unreachable",
    body: "The machine running this deployment is not connected right now. It usually comes back within a minute.",
  },
  port_not_ready: {
    status: 502,
    title: "Not answering yet",
    body: "The container runs, but nothing answers on this port yet. If it just started, it may still be loading.",
  },
  timeout: { status: 504, title: "Timed out", body: "The container did not answer in time." },
};

export function failurePage(kind: GatewayFailure, detail?: string) {
  const t = TEXT[kind];
  const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${t.status} ${esc(t.title)}</title><style>body{font:16px system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}small{color:#777}</style></head><body><h1>${esc(t.title)}</h1><p>${esc(t.body)}</p>${detail ? `<p><small>${esc(detail)}</small></p>` : ""}</body></html>`;
  return { status: t.status, html, code: kind.toUpperCase() };
}
