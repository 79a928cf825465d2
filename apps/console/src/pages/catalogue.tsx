import type { NodeListQuery, NodeSummary } from "@cm/sdk";
import { useApi } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { GpuBadges, StatusBadge } from "../components/badges";
import { Field } from "../components/field";
import { dollarsPerHour, gigabytes } from "../components/format";
import { NODE_STATUSES, REGIONS } from "../components/lists";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import { navigate, useLocation } from "../router/router";

/** How often the catalogue asks again: a node's online state is what its agent's heartbeats (every 10 s by default) say. */
const POLL_MS = 5_000;

/** The seven filters of GET /nodes (the spec's), as the URL's query keeps them: a filtered catalogue is a link. */
const NUMBER_FILTERS = [
  { key: "minGpuVram", label: "Min GPU memory (MB)" },
  { key: "minCpuCores", label: "Min CPU cores" },
  { key: "minRamMb", label: "Min RAM (MB)" },
  { key: "maxHourlyRate", label: "Max price (credits/GPU-hour)" },
] as const;

type Sort = "price-asc" | "price-desc";

function toQuery(params: URLSearchParams): NodeListQuery {
  const q: NodeListQuery = { limit: 100 };
  const status = params.get("status");
  if (status && (NODE_STATUSES as readonly string[]).includes(status)) q.status = status as NodeListQuery["status"];
  const region = params.get("region");
  if (region && (REGIONS as readonly string[]).includes(region)) q.region = region as NodeListQuery["region"];
  const hasGpu = params.get("hasGpu");
  if (hasGpu === "true" || hasGpu === "false") q.hasGpu = hasGpu === "true";
  for (const { key } of NUMBER_FILTERS) {
    const v = params.get(key);
    if (v !== null && v !== "" && Number.isFinite(Number(v))) q[key] = Number(v);
  }
  return q;
}

function sorted(nodes: NodeSummary[], sort: Sort): NodeSummary[] {
  const sign = sort === "price-desc" ? -1 : 1;
  return [...nodes].sort((a, b) => sign * (a.hourlyRateCents - b.hourlyRateCents) || a.name.localeCompare(b.name));
}

function Catalogue() {
  const api = useApi();
  const { query: params } = useLocation();
  const query = toQuery(params);
  const sort: Sort = params.get("sort") === "price-desc" ? "price-desc" : "price-asc";
  const key = JSON.stringify(query);
  const { data, error, loading, reload } = useApiCall(() => api.nodes.list(query), key, { pollMs: POLL_MS });

  const set = (name: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value === "") next.delete(name);
    else next.set(name, value);
    const search = next.toString();
    navigate(`/nodes${search ? `?${search}` : ""}`, { replace: true });
  };

  return (
    <>
      <h1>Node catalogue</h1>
      <form className="filters" aria-label="Filter nodes" onSubmit={(e) => e.preventDefault()}>
        <Field label="Status">
          {(id) => (
            <select id={id} name="status" value={params.get("status") ?? ""} onChange={(e) => set("status", e.target.value)}>
              <option value="">Any</option>
              {NODE_STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Region">
          {(id) => (
            <select id={id} name="region" value={params.get("region") ?? ""} onChange={(e) => set("region", e.target.value)}>
              <option value="">Any</option>
              {REGIONS.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="GPU">
          {(id) => (
            <select id={id} name="hasGpu" value={params.get("hasGpu") ?? ""} onChange={(e) => set("hasGpu", e.target.value)}>
              <option value="">Any</option>
              <option value="true">With GPU</option>
              <option value="false">CPU only</option>
            </select>
          )}
        </Field>
        {NUMBER_FILTERS.map(({ key, label }) => (
          <Field key={key} label={label}>
            {(id) => (
              <input id={id} name={key} type="number" min={0} inputMode="numeric" value={params.get(key) ?? ""} onChange={(e) => set(key, e.target.value)} />
            )}
          </Field>
        ))}
        <Field label="Sort">
          {(id) => (
            <select id={id} name="sort" value={sort} onChange={(e) => set("sort", e.target.value === "price-asc" ? "" : e.target.value)}>
              <option value="price-asc">Price, lowest first</option>
              <option value="price-desc">Price, highest first</option>
            </select>
          )}
        </Field>
      </form>

      <ErrorNotice error={error} onRetry={reload} />
      {!data && loading && <Loading label="Loading nodes…" />}
      {data && (
        <>
          <p className="count" aria-live="polite">
            {data.pagination.total} {data.pagination.total === 1 ? "node" : "nodes"}
            {data.pagination.total > data.nodes.length ? `, the first ${data.nodes.length} shown` : ""}
          </p>
          <ul className="nodes" aria-label="Nodes">
            {sorted(data.nodes, sort).map((n) => (
              <li key={n.id} className="node" data-node-id={n.id}>
                <div className="node-head">
                  <h2>{n.name}</h2>
                  <StatusBadge status={n.status} />
                </div>
                <p className="node-gpus">
                  <GpuBadges gpus={n.gpus} />
                </p>
                <dl className="node-facts">
                  <dt>Price</dt>
                  <dd>{dollarsPerHour(n.hourlyRateCents)}</dd>
                  <dt>Region</dt>
                  <dd>
                    {n.region} ({n.country})
                  </dd>
                  <dt>CPU</dt>
                  <dd>{n.specs.cpuCores} cores</dd>
                  <dt>RAM</dt>
                  <dd>{gigabytes(n.specs.ramMb)}</dd>
                  <dt>Free GPUs</dt>
                  <dd>{n.freeGpus}</dd>
                  <dt>Uptime (30 days)</dt>
                  <dd>{n.uptimePercent}%</dd>
                </dl>
                {n.maintenanceReason && <p className="node-note">In maintenance: {n.maintenanceReason}</p>}
                {n.status === "online" && (
                  <Link to={`/deploy?node=${encodeURIComponent(n.id)}`} className="button" aria-label={`Deploy here, on ${n.name}`}>
                    Deploy here
                  </Link>
                )}
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  );
}

export const page: PageDefinition = { path: "/nodes", title: "Catalogue", nav: 10, component: Catalogue };
