import type { TemplateListResponse } from "@cm/sdk";
import { useApi } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { Field } from "../components/field";
import { CATEGORY_LABELS, TEMPLATE_CATEGORIES, type TemplateCategory } from "../components/lists";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import { navigate, useLocation } from "../router/router";

type Template = TemplateListResponse["templates"][number];

function Templates() {
  const api = useApi();
  const { query: params } = useLocation();
  const raw = params.get("category");
  const category = TEMPLATE_CATEGORIES.find((c) => c === raw);
  const search = params.get("search") ?? "";
  const { data, error, loading, reload } = useApiCall(() => api.templates.list({ category, search: search.trim() || undefined }), `${category}|${search}`);

  const set = (name: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value === "") next.delete(name);
    else next.set(name, value);
    const s = next.toString();
    navigate(`/templates${s ? `?${s}` : ""}`, { replace: true });
  };

  const groups = new Map<TemplateCategory, Template[]>();
  for (const t of data?.templates ?? []) groups.set(t.category, [...(groups.get(t.category) ?? []), t]);

  return (
    <>
      <h1>Templates</h1>

      <form className="filters" aria-label="Find templates" onSubmit={(e) => e.preventDefault()}>
        <Field label="Search">
          {(id) => <input id={id} name="search" type="search" maxLength={100} value={search} onChange={(e) => set("search", e.target.value)} />}
        </Field>
        <Field label="Category">
          {(id) => (
            <select id={id} name="category" value={category ?? ""} onChange={(e) => set("category", e.target.value)}>
              <option value="">All</option>
              {TEMPLATE_CATEGORIES.map((c) => (
                <option key={c} value={c}>
                  {CATEGORY_LABELS[c]}
                </option>
              ))}
            </select>
          )}
        </Field>
      </form>
      <ErrorNotice error={error} onRetry={reload} />
      {!data && loading && <Loading label="Loading templates…" />}
      {data && data.templates.length === 0 && <p>No template matches.</p>}
      {TEMPLATE_CATEGORIES.filter((c) => groups.has(c)).map((c) => (
        <section key={c} aria-labelledby={`cat-${c}`}>
          <h2 id={`cat-${c}`}>{CATEGORY_LABELS[c]}</h2>
          <ul className="templates">
            {groups.get(c)!.map((t) => (
              <li key={t.id} className="template">
                <h3>{t.name}</h3>
                <p>{t.description}</p>
                <p>
                  {t.requiresGpu ? (
                    <span className="badge gpu">GPU{t.minGpuVram > 0 ? `, ${Math.round(t.minGpuVram / 1024)} GB+` : ""}</span>
                  ) : (
                    <span className="badge gpu-none">No GPU needed</span>
                  )}
                </p>
                <Link to={`/deploy?template=${encodeURIComponent(t.slug)}`} className="button">
                  Deploy {t.name}
                </Link>
              </li>
            ))}
          </ul>
        </section>
      ))}
    </>
  );
}

export const page: PageDefinition = { path: "/templates", title: "Templates", nav: 20, component: Templates };
