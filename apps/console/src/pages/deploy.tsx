import { ApiError } from "@cm/sdk";
import { type FormEvent, useState } from "react";
import { useApi } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { type DeployForm, deployBody } from "../components/deploy-body";
import { DeployEstimate, useEstimate } from "../components/deploy-estimate";
import { EnvRows, newEnvRow } from "../components/env-rows";
import { dollarsPerHour, gigabytes } from "../components/format";
import { Labelled } from "../components/labelled";
import { REGIONS } from "../components/lists";
import { PlacementRefusal, type Refusal } from "../components/placement-refusal";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import { navigate, useLocation } from "../router/router";
import "./deploy.css";

const memory = (mb: number) => (mb < 1024 ? `${mb} MB` : gigabytes(mb));

function initialForm(query: URLSearchParams): DeployForm {
  const node = query.get("node") ?? "";
  return {
    source: query.get("image") ? "image" : "template",
    templateId: query.get("template") ?? "",
    image: query.get("image") ?? "",
    registryCredentialId: "",
    placement: node ? "node" : "cheapest",
    nodeId: node,
    region: "",
    maxHourlyRate: "",
    gpuModel: "",
    minGpuVram: "",
    name: "",
    gpuCount: "",
    cpuCores: "",
    memoryMb: "",
    command: "",
    env: [newEnvRow()],
    ports: "",
    tcpPorts: "",
  };
}

function Deploy() {
  const api = useApi();
  const { query } = useLocation();
  const [form, setForm] = useState<DeployForm>(() => initialForm(query));
  const [submitting, setSubmitting] = useState(false);
  const [submitError, setSubmitError] = useState<unknown>();

  const templates = useApiCall(() => api.templates.list(), "templates");
  const nodes = useApiCall(() => api.nodes.list({ status: "online", limit: 100 }), "online-nodes", { pollMs: 15_000 });
  const credentials = useApiCall(() => api.registryCredentials.list(), "credentials");
  const balance = useApiCall(() => api.credits.balance(), "balance", { pollMs: 15_000 });
  const template = useApiCall(
    () => (form.source === "template" && form.templateId ? api.templates.get(form.templateId) : Promise.resolve(undefined)),
    `${form.source}|${form.templateId}`,
  );

  const built = deployBody(form);
  const body = "body" in built ? built.body : undefined;
  const estimate = useEstimate(body);

  // A change answers the last refusal: the estimate of the new form says what now holds.
  const edit = (change: (f: DeployForm) => DeployForm) => {
    setSubmitError(undefined);
    setForm(change);
  };
  const set = <K extends keyof DeployForm>(key: K, value: DeployForm[K]) => edit((f) => ({ ...f, [key]: value }));

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!body || submitting) return;
    setSubmitting(true);
    setSubmitError(undefined);
    try {
      const created = await api.deployments.create(body);
      navigate(`/deployments/${encodeURIComponent(created.deployment.id)}`);
    } catch (error) {
      setSubmitError(error);
      setSubmitting(false);
    }
  };

  const tpl = template.data?.template;
  const submitRefusal: Refusal | undefined =
    submitError instanceof ApiError &&
    (submitError.code === "INSUFFICIENT_CREDITS" || submitError.code === "NO_NODE_FITS" || submitError.code.startsWith("NODE_"))
      ? { code: submitError.code, message: submitError.message, details: submitError.details }
      : undefined;

  return (
    <>
      <h1>Deploy</h1>
      <form className="deploy" aria-label="Deploy" onSubmit={submit} noValidate>
        <fieldset>
          <legend>What to run</legend>
          <div className="choice">
            <label>
              <input type="radio" name="source" checked={form.source === "template"} onChange={() => set("source", "template")} /> A template
            </label>
            <label>
              <input type="radio" name="source" checked={form.source === "image"} onChange={() => set("source", "image")} /> A container image
            </label>
          </div>
          {form.source === "template" ? (
            <>
              <Labelled label="Template">
                {(id) => (
                  <select id={id} value={templateValue(form.templateId, templates.data?.templates)} onChange={(e) => set("templateId", e.target.value)}>
                    <option value="">Choose a template…</option>
                    {templates.data?.templates.map((t) => (
                      <option key={t.id} value={t.slug}>
                        {t.name}
                      </option>
                    ))}
                  </select>
                )}
              </Labelled>
              <ErrorNotice error={templates.error ?? template.error} onRetry={templates.error ? templates.reload : template.reload} />
              {tpl && (
                <p className="template-facts">
                  {tpl.description} Image <code>{tpl.containerImage}</code>; needs at least {tpl.minCpuCores > 0 ? `${tpl.minCpuCores} CPU cores, ` : ""}
                  {memory(tpl.minRamMb)} memory, {tpl.minDiskGb} GB disk{tpl.requiresGpu ? `, a GPU with ${memory(tpl.minGpuVram)}` : ""}
                  {tpl.ports.length ? `; serves ${tpl.ports.map((p) => `${p.internal} (${p.description})`).join(", ")}` : ""}.
                </p>
              )}
            </>
          ) : (
            <>
              <Labelled label="Image" hint="A reference such as ubuntu:22.04 or ghcr.io/org/app:tag.">
                {(id, hintId) => (
                  <input
                    id={id}
                    aria-describedby={hintId}
                    name="image"
                    autoComplete="off"
                    spellCheck={false}
                    value={form.image}
                    onChange={(e) => set("image", e.target.value)}
                  />
                )}
              </Labelled>
              <Labelled label="Registry credential" hint="For a private image: the login the node pulls it with. Add one on the Account page.">
                {(id, hintId) => (
                  <select id={id} aria-describedby={hintId} value={form.registryCredentialId} onChange={(e) => set("registryCredentialId", e.target.value)}>
                    <option value="">None (a public or local image)</option>
                    {credentials.data?.map((c) => (
                      <option key={c.id} value={c.id}>
                        {c.username} at {c.registry}
                      </option>
                    ))}
                  </select>
                )}
              </Labelled>
              <ErrorNotice error={credentials.error} onRetry={credentials.reload} />
            </>
          )}
          <Labelled label="Name (optional)">
            {(id) => <input id={id} name="name" maxLength={100} value={form.name} onChange={(e) => set("name", e.target.value)} />}
          </Labelled>
        </fieldset>

        <fieldset>
          <legend>Where to run it</legend>
          <div className="choice">
            <label>
              <input type="radio" name="placement" checked={form.placement === "cheapest"} onChange={() => set("placement", "cheapest")} /> The cheapest node
              that fits
            </label>
            <label>
              <input type="radio" name="placement" checked={form.placement === "node"} onChange={() => set("placement", "node")} /> A node I pick
            </label>
          </div>
          {form.placement === "node" ? (
            <>
              <Labelled label="Node" hint="Online nodes of the catalogue, cheapest first.">
                {(id, hintId) => (
                  <select id={id} aria-describedby={hintId} value={form.nodeId} onChange={(e) => set("nodeId", e.target.value)}>
                    <option value="">Choose a node…</option>
                    {form.nodeId && nodes.data && !nodes.data.nodes.some((n) => n.id === form.nodeId) && (
                      <option value={form.nodeId}>{form.nodeId} (not online now)</option>
                    )}
                    {[...(nodes.data?.nodes ?? [])]
                      .sort((a, b) => a.hourlyRateCents - b.hourlyRateCents)
                      .map((n) => (
                        <option key={n.id} value={n.id}>
                          {n.name}: {n.freeGpus} free GPU{n.freeGpus === 1 ? "" : "s"}, {n.specs.cpuCores} cores, {dollarsPerHour(n.hourlyRateCents)},{" "}
                          {n.region}
                        </option>
                      ))}
                  </select>
                )}
              </Labelled>
              <p className="hint">
                Or browse the <Link to="/nodes">catalogue</Link>.
              </p>
              <ErrorNotice error={nodes.error} onRetry={nodes.reload} />
            </>
          ) : (
            <div className="grid">
              <Labelled label="Region">
                {(id) => (
                  <select id={id} value={form.region} onChange={(e) => set("region", e.target.value)}>
                    <option value="">Any</option>
                    {REGIONS.map((r) => (
                      <option key={r} value={r}>
                        {r}
                      </option>
                    ))}
                  </select>
                )}
              </Labelled>
              <Labelled label="Max price (credits/GPU-hour)">
                {(id) => (
                  <input id={id} type="number" min={0} inputMode="decimal" value={form.maxHourlyRate} onChange={(e) => set("maxHourlyRate", e.target.value)} />
                )}
              </Labelled>
              <Labelled label="GPU model" hint="Part of the GPU's name: H100, 4090.">
                {(id, hintId) => <input id={id} aria-describedby={hintId} value={form.gpuModel} onChange={(e) => set("gpuModel", e.target.value)} />}
              </Labelled>
              <Labelled label="Min GPU memory (MB)">
                {(id) => (
                  <input id={id} type="number" min={0} inputMode="numeric" value={form.minGpuVram} onChange={(e) => set("minGpuVram", e.target.value)} />
                )}
              </Labelled>
            </div>
          )}
        </fieldset>

        <fieldset>
          <legend>Resources</legend>
          <p className="hint">Left empty, each takes the API's default: one GPU for a template that needs one, and the node's share of CPU and memory.</p>
          <div className="grid">
            <Labelled label="GPUs">
              {(id) => (
                <input id={id} type="number" min={0} max={64} inputMode="numeric" value={form.gpuCount} onChange={(e) => set("gpuCount", e.target.value)} />
              )}
            </Labelled>
            <Labelled label="CPU cores">
              {(id) => (
                <input
                  id={id}
                  type="number"
                  min={0.01}
                  step={0.01}
                  inputMode="decimal"
                  value={form.cpuCores}
                  onChange={(e) => set("cpuCores", e.target.value)}
                />
              )}
            </Labelled>
            <Labelled label="Memory (MB)">
              {(id) => <input id={id} type="number" min={64} inputMode="numeric" value={form.memoryMb} onChange={(e) => set("memoryMb", e.target.value)} />}
            </Labelled>
          </div>
        </fieldset>

        <fieldset>
          <legend>Command, environment and ports</legend>
          <Labelled label="Command (optional)" hint='Replaces the image&apos;s command; split into words as a shell would, run by no shell: sh -c "echo hi".'>
            {(id, hintId) => (
              <input
                id={id}
                aria-describedby={hintId}
                name="command"
                autoComplete="off"
                spellCheck={false}
                value={form.command}
                onChange={(e) => set("command", e.target.value)}
              />
            )}
          </Labelled>
          <EnvRows
            rows={form.env}
            legend={`Environment variables${tpl && Object.keys(tpl.defaultEnv).length ? " (added to the template's)" : ""}`}
            onChange={(change) => edit((f) => ({ ...f, env: change(f.env) }))}
          />
          <div className="grid">
            <Labelled
              label="HTTP ports"
              hint={`Container ports given a public HTTPS endpoint, comma-separated${tpl?.ports.length ? `; empty: the template's (${tpl.ports.map((p) => p.internal).join(", ")})` : ""}.`}
            >
              {(id, hintId) => (
                <input id={id} aria-describedby={hintId} inputMode="numeric" value={form.ports} onChange={(e) => set("ports", e.target.value)} />
              )}
            </Labelled>
            <Labelled label="TCP ports" hint="Raw TCP through the control plane (cm port-forward, cm ssh), never public; comma-separated.">
              {(id, hintId) => (
                <input id={id} aria-describedby={hintId} inputMode="numeric" value={form.tcpPorts} onChange={(e) => set("tcpPorts", e.target.value)} />
              )}
            </Labelled>
          </div>
        </fieldset>

        <DeployEstimate
          problem={"problem" in built ? built.problem : undefined}
          estimate={estimate}
          available={balance.data?.balance.available}
          nodes={nodes.data?.nodes}
        />

        {submitRefusal ? <PlacementRefusal refusal={submitRefusal} /> : <ErrorNotice error={submitError} />}
        <div className="actions">
          <button type="submit" disabled={!body || submitting}>
            {submitting ? "Deploying…" : "Deploy"}
          </button>
          {submitting && <Loading label="Creating the deployment…" />}
        </div>
      </form>
    </>
  );
}

/** The select's value for what the address or the user named: a template's id is shown as its slug. */
function templateValue(idOrSlug: string, list: Array<{ id: string; slug: string }> | undefined): string {
  return list?.find((t) => t.id === idOrSlug)?.slug ?? idOrSlug;
}

export const page: PageDefinition = { path: "/deploy", title: "Deploy", nav: 30, signedIn: true, component: Deploy };
