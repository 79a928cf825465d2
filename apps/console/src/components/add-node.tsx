import { agentInstallCommand, type CreateNodeResponse, type OperatorNode } from "@cm/sdk";
import { type FormEvent, useState } from "react";
import { useApi } from "../api/api-context";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Link } from "../router/link";
import { Labelled } from "./labelled";
import { REGIONS, type Region } from "./lists";
import { agentText } from "./operator-format";

type Added = { node: CreateNodeResponse["node"]; command: string };

/**
 * Registers a node, then shows the one line that installs its agent from a release's files
 * (the token in it, shown this once: the API keeps only its hash), and follows the node in
 * `nodes` (the page's polled list) until its agent comes online.
 */
export function AddNode({ nodes, onAdded }: { nodes: OperatorNode[] | undefined; onAdded: () => void }) {
  const api = useApi();
  const [form, setForm] = useState({ name: "", region: "us-east" as Region, country: "", rate: "50", max: "4" });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [added, setAdded] = useState<Added>();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const answer = await api.operator.registerNode({
        name: form.name.trim(),
        region: form.region,
        country: form.country.trim().toUpperCase(),
        hourlyRateCents: Number(form.rate),
        maxDeployments: Number(form.max),
      });
      // The API's own origin: the console is served from it, and the agent dials it.
      setAdded({ node: answer.node, command: agentInstallCommand(window.location.origin, answer.agentToken) });
      onAdded();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (added) return <Enrolment added={added} live={nodes?.find((n) => n.id === added.node.id)} onDone={() => setAdded(undefined)} />;

  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm((f) => ({ ...f, [k]: e.target.value }));
  return (
    <form className="operator-form" aria-labelledby="add-node-title" onSubmit={submit}>
      <h2 id="add-node-title">Add a node</h2>
      <p>Name the GPU server you enrol; you get the one command that installs its agent.</p>
      <div className="operator-fields">
        <Labelled label="Node name">{(id) => <input id={id} required maxLength={100} value={form.name} onChange={set("name")} />}</Labelled>
        <Labelled label="Region">
          {(id) => (
            <select id={id} value={form.region} onChange={set("region")}>
              {REGIONS.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </select>
          )}
        </Labelled>
        <Labelled label="Country" hint="Two letters: US, DE…">
          {(id, hint) => (
            <input
              id={id}
              aria-describedby={hint}
              required
              pattern="[A-Za-z]{2}"
              maxLength={2}
              autoComplete="country"
              value={form.country}
              onChange={set("country")}
            />
          )}
        </Labelled>
        <Labelled label="Price (credits per GPU-hour)" hint="1 credit = 1 US cent">
          {(id, hint) => <input id={id} aria-describedby={hint} type="number" required min={0} step={1} value={form.rate} onChange={set("rate")} />}
        </Labelled>
        <Labelled label="Most deployments at once">
          {(id) => <input id={id} type="number" required min={1} max={256} step={1} value={form.max} onChange={set("max")} />}
        </Labelled>
      </div>
      <button type="submit" className="button" disabled={busy}>
        {busy ? "Adding…" : "Add node"}
      </button>
      <ErrorNotice error={error} />
    </form>
  );
}

function Enrolment({ added, live, onDone }: { added: Added; live: OperatorNode | undefined; onDone: () => void }) {
  const [copied, setCopied] = useState<"yes" | "no">();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(added.command);
      setCopied("yes");
    } catch {
      setCopied("no");
    }
  };
  const online = live?.status === "online";
  return (
    <section className="operator-form enrolment" aria-labelledby="enrol-title">
      <h2 id="enrol-title">Install the agent on {added.node.name}</h2>
      <p>
        On the GPU server, in a directory holding a release's <code>install-cm-agent.sh</code>, its <code>cm-agent</code> tarball and <code>SHA256SUMS</code>,
        run this one line as a user who may use sudo. Nothing else is needed there: no <code>cm</code>, no wallet.
      </p>
      <p className="once" role="note">
        <strong>Shown once:</strong> this command holds the node's agent token, which is not stored anywhere it can be read again. Copy it now; if it is lost,
        retire the node and add it again.
      </p>
      <pre className="install-command">
        <code>{added.command}</code>
      </pre>
      <p>
        <button type="button" className="button" onClick={copy}>
          Copy command
        </button>{" "}
        <span role="status">{copied === "yes" ? "Copied." : copied === "no" ? "The browser refused to copy: select the command and copy it." : ""}</span>
      </p>
      {online ? (
        <p role="status" className="came-online">
          {added.node.name} is online (agent {agentText(live)}). <Link to={`/operator/nodes/${added.node.id}`}>Open {added.node.name}</Link>
        </p>
      ) : (
        <Loading label={`Waiting for ${added.node.name} to come online… It appears here once its agent connects.`} />
      )}
      <button type="button" className="button secondary" onClick={onDone}>
        {online ? "Done" : "Hide the command"}
      </button>
    </section>
  );
}
