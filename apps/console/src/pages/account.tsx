import type { ApiKey, ApiKeyScope, CreateApiKeyResponse, RegistryCredential } from "@cm/sdk";
import { type FormEvent, useEffect, useRef, useState } from "react";
import { useApi } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import type { PageDefinition } from "../router/pages";
import "./account.css";

const when = (iso: string | null, never = "never") => (iso ? new Date(iso).toLocaleString() : never);

/** The scopes a key may hold, as the API names them, and what each lets a script do. */
const SCOPES: { scope: ApiKeyScope; what: string }[] = [
  { scope: "read", what: "the catalogue, your deployments, their logs, your balance and history" },
  { scope: "deploy", what: "create, start, stop and delete deployments, open terminals, registry logins, deposits" },
  { scope: "operator", what: "your nodes and earnings" },
  { scope: "payouts", what: "request payouts of your earnings" },
];

/** Key lifetimes offered (seconds); the API takes 60 s to 366 days, or none. */
const LIFETIMES: { label: string; seconds?: number }[] = [
  { label: "30 days", seconds: 30 * 86_400 },
  { label: "7 days", seconds: 7 * 86_400 },
  { label: "1 day", seconds: 86_400 },
  { label: "90 days", seconds: 90 * 86_400 },
  { label: "1 year", seconds: 365 * 86_400 },
  { label: "Never (until revoked)" },
];

function Account() {
  return (
    <div className="account-page">
      <h1>Account</h1>
      <ApiKeys />
      <RegistryCredentials />
    </div>
  );
}

function ApiKeys() {
  const client = useApi();
  const [changes, setChanges] = useState(0);
  const list = useApiCall(() => client.auth.apiKeys.list(), `keys ${changes}`);
  const [created, setCreated] = useState<CreateApiKeyResponse | undefined>();
  const [name, setName] = useState("");
  const [scopes, setScopes] = useState<ApiKeyScope[]>(["read"]);
  const [lifetime, setLifetime] = useState(0);
  const [creating, setCreating] = useState(false);
  const [error, setError] = useState<unknown>();

  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    if (scopes.length === 0) return setError(new Error("Choose at least one scope: what the key may do."));
    setCreating(true);
    try {
      const seconds = LIFETIMES[lifetime]?.seconds;
      setCreated(await client.auth.apiKeys.create({ name: name.trim(), scopes, ...(seconds ? { expiresInS: seconds } : {}) }));
      setName("");
      setChanges((n) => n + 1);
    } catch (err) {
      setError(err);
    } finally {
      setCreating(false);
    }
  };

  return (
    <section aria-labelledby="keys-title" className="account-section">
      <h2 id="keys-title">API keys</h2>
      <p>
        A key lets a script or the <code>cm</code> command line call the API as you, without your wallet. Give each use its own key, with only the scopes it
        needs. Keys cannot manage keys: only your signed-in wallet can.
      </p>
      {created && <NewKey created={created} onDone={() => setCreated(undefined)} />}
      <form className="account-form" onSubmit={(e) => void create(e)} aria-labelledby="new-key-title">
        <h3 id="new-key-title">Create a key</h3>
        <div className="field">
          <label htmlFor="key-name">Key name</label>
          <input
            id="key-name"
            required
            maxLength={100}
            value={name}
            onChange={(e) => setName(e.target.value)}
            placeholder="ci-deploys"
            aria-describedby="key-name-help"
          />
          <small id="key-name-help">What uses it, so you know which to revoke.</small>
        </div>
        <fieldset className="account-scopes">
          <legend>Scopes</legend>
          {SCOPES.map(({ scope, what }) => (
            <label key={scope} className="account-check">
              <input
                type="checkbox"
                checked={scopes.includes(scope)}
                onChange={(e) => setScopes((s) => (e.target.checked ? [...s, scope] : s.filter((x) => x !== scope)))}
              />
              <span>
                <strong>{scope}</strong>: {what}
              </span>
            </label>
          ))}
        </fieldset>
        <div className="field">
          <label htmlFor="key-expiry">Expires after</label>
          <select id="key-expiry" value={lifetime} onChange={(e) => setLifetime(Number(e.target.value))}>
            {LIFETIMES.map((l, i) => (
              <option key={l.label} value={i}>
                {l.label}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" disabled={creating}>
          Create key
        </button>
        {creating && <Loading label="Creating the key…" />}
        <ErrorNotice error={error} />
      </form>
      <h3>Your keys</h3>
      <ErrorNotice error={list.error} onRetry={list.reload} />
      {!list.data && !list.error && <Loading label="Reading your keys…" />}
      {list.data &&
        (list.data.apiKeys.length === 0 ? (
          <p>No API keys yet.</p>
        ) : (
          <ul className="account-list" aria-label="API keys">
            {list.data.apiKeys.map((k) => (
              <KeyRow key={k.id} apiKey={k} onRevoked={() => setChanges((n) => n + 1)} />
            ))}
          </ul>
        ))}
    </section>
  );
}

/** The key itself, this once: the API keeps only its hash, so it is never shown again. */
function NewKey({ created, onDone }: { created: CreateApiKeyResponse; onDone: () => void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  const [copied, setCopied] = useState<string | undefined>();
  const copy = () =>
    navigator.clipboard.writeText(created.key).then(
      () => setCopied("Copied to the clipboard."),
      () => setCopied("Copying failed: select the key and copy it."),
    );
  return (
    <section className="account-new-key" aria-labelledby="new-key-shown">
      <h3 id="new-key-shown" ref={heading} tabIndex={-1}>
        Your new key “{created.apiKey.name}”
      </h3>
      <p className="account-warning">
        <strong>This is the only time the key is shown.</strong> Copy it now and keep it somewhere safe (a secret store, not a repository). If you lose it,
        create a new one and revoke this one.
      </p>
      <p className="account-key">
        <code data-testid="new-api-key">{created.key}</code>
      </p>
      <p className="account-actions">
        <button type="button" onClick={() => void copy()}>
          Copy key
        </button>
        <button type="button" className="account-secondary" onClick={onDone}>
          I have stored it
        </button>
        <span role="status">{copied}</span>
      </p>
    </section>
  );
}

function KeyRow({ apiKey: k, onRevoked }: { apiKey: ApiKey; onRevoked: () => void }) {
  const client = useApi();
  return (
    <li className="account-item" aria-label={`API key ${k.name}`}>
      <div>
        <strong>{k.name}</strong> <code>{k.prefix}…</code>
      </div>
      <dl className="account-facts">
        <dt>Scopes</dt>
        <dd>{k.scopes.join(", ")}</dd>
        <dt>Created</dt>
        <dd>{when(k.createdAt)}</dd>
        <dt>Last used</dt>
        <dd>{when(k.lastUsedAt)}</dd>
        <dt>Expires</dt>
        <dd>{when(k.expiresAt)}</dd>
      </dl>
      <ConfirmRemove
        action="Revoke"
        what={`the key “${k.name}”`}
        consequence="Scripts using it stop working at once."
        run={() => client.auth.apiKeys.remove(k.id)}
        onDone={onRevoked}
      />
    </li>
  );
}

/** A destructive action behind a second, explicit click: the question says what will happen. */
function ConfirmRemove({
  action,
  what,
  consequence,
  run,
  onDone,
}: {
  action: string;
  what: string;
  consequence: string;
  run: () => Promise<unknown>;
  onDone: () => void;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const confirm = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) confirm.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" className="account-danger-outline" onClick={() => setAsking(true)} aria-label={`${action} ${what}`}>
        {action}
      </button>
    );
  }
  return (
    <fieldset className="account-confirm">
      <legend>
        {action} {what}? {consequence}
      </legend>
      <button
        type="button"
        ref={confirm}
        className="account-danger"
        disabled={busy}
        onClick={async () => {
          setBusy(true);
          setError(undefined);
          try {
            await run();
            onDone();
          } catch (err) {
            setError(err);
            setBusy(false);
          }
        }}
      >
        Yes, {action.toLowerCase()}
      </button>{" "}
      <button type="button" className="account-secondary" disabled={busy} onClick={() => setAsking(false)}>
        Cancel
      </button>
      {busy && <Loading label={`${action === "Revoke" ? "Revoking" : "Removing"}…`} />}
      <ErrorNotice error={error} />
    </fieldset>
  );
}

function RegistryCredentials() {
  const client = useApi();
  const [changes, setChanges] = useState(0);
  const list = useApiCall(() => client.registryCredentials.list(), `registry ${changes}`);
  const [form, setForm] = useState({ registry: "", username: "", password: "" });
  const [adding, setAdding] = useState(false);
  const [added, setAdded] = useState<RegistryCredential | undefined>();
  const [error, setError] = useState<unknown>();

  const add = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    setAdded(undefined);
    setAdding(true);
    try {
      setAdded(await client.registryCredentials.create({ registry: form.registry.trim(), username: form.username, password: form.password }));
      setForm({ registry: "", username: "", password: "" });
      setChanges((n) => n + 1);
    } catch (err) {
      setError(err);
    } finally {
      setAdding(false);
    }
  };

  return (
    <section aria-labelledby="registry-title" className="account-section">
      <h2 id="registry-title">Registry credentials</h2>
      <p>
        Logins to private image registries. A deployment names one to pull its image; the password is stored sealed, goes only to the node that pulls the image,
        and is never shown again.
      </p>
      <form className="account-form" onSubmit={(e) => void add(e)} aria-labelledby="new-registry-title">
        <h3 id="new-registry-title">Add a login</h3>
        <div className="field">
          <label htmlFor="registry-host">Registry</label>
          <input
            id="registry-host"
            required
            value={form.registry}
            onChange={(e) => setForm({ ...form, registry: e.target.value })}
            placeholder="ghcr.io"
            aria-describedby="registry-host-help"
            autoCapitalize="none"
            spellCheck={false}
          />
          <small id="registry-host-help">Its host[:port] as image names write it: ghcr.io, registry.example.com:5000, docker.io for Docker Hub.</small>
        </div>
        <div className="field">
          <label htmlFor="registry-user">Username</label>
          <input
            id="registry-user"
            required
            maxLength={255}
            value={form.username}
            onChange={(e) => setForm({ ...form, username: e.target.value })}
            autoComplete="off"
            autoCapitalize="none"
            spellCheck={false}
          />
        </div>
        <div className="field">
          <label htmlFor="registry-password">Password or access token</label>
          <input
            id="registry-password"
            type="password"
            required
            maxLength={8192}
            value={form.password}
            onChange={(e) => setForm({ ...form, password: e.target.value })}
            autoComplete="new-password"
          />
        </div>
        <button type="submit" disabled={adding}>
          Add login
        </button>
        {adding && <Loading label="Storing the login…" />}
        {added && (
          <p role="status" className="account-ok">
            Stored the login {added.username} at {added.registry}.
          </p>
        )}
        <ErrorNotice error={error} />
      </form>
      <h3>Your logins</h3>
      <ErrorNotice error={list.error} onRetry={list.reload} />
      {!list.data && !list.error && <Loading label="Reading your registry logins…" />}
      {list.data &&
        (list.data.length === 0 ? (
          <p>No registry logins yet: public images need none.</p>
        ) : (
          <ul className="account-list" aria-label="Registry credentials">
            {list.data.map((c) => (
              <li key={c.id} className="account-item" aria-label={`Registry login ${c.username} at ${c.registry}`}>
                <div>
                  <strong>{c.registry}</strong> as <code>{c.username}</code>
                </div>
                <dl className="account-facts">
                  <dt>Added</dt>
                  <dd>{when(c.createdAt)}</dd>
                  <dt>Last used</dt>
                  <dd>{when(c.lastUsedAt)}</dd>
                </dl>
                <ConfirmRemove
                  action="Remove"
                  what={`the login ${c.username} at ${c.registry}`}
                  consequence="Deployments naming it can no longer pull their image."
                  run={() => client.registryCredentials.remove(c.id)}
                  onDone={() => {
                    setAdded(undefined);
                    setChanges((n) => n + 1);
                  }}
                />
              </li>
            ))}
          </ul>
        ))}
    </section>
  );
}

export const page: PageDefinition = { path: "/account", title: "Account", nav: 70, signedIn: true, component: Account };
