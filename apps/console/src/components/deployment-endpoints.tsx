import type { Deployment } from "@cm/sdk";
import { useState } from "react";

function CopyButton({ text, label }: { text: string; label: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState("copied");
    } catch {
      // No clipboard permission (an insecure origin, a refusal): the URL is on screen to select by hand.
      setState("failed");
    }
    setTimeout(() => setState("idle"), 2_000);
  };
  return (
    <button type="button" onClick={copy} aria-label={`Copy ${label}`}>
      {state === "copied" ? "Copied" : state === "failed" ? "Copy failed: select the address" : "Copy"}
    </button>
  );
}

/** The deployment's public HTTPS endpoints (copy, open) and its TCP ports, reached through the control plane only. */
export function DeploymentEndpoints({ deployment: d }: { deployment: Deployment }) {
  return (
    <section aria-labelledby="endpoints-heading">
      <h2 id="endpoints-heading">Endpoints</h2>
      {d.endpoints.length === 0 ? (
        <p className="muted">
          {d.ports.length === 0 ? "No HTTP port is exposed." : `Ports ${d.ports.join(", ")} get a public address while the deployment is running.`}
        </p>
      ) : (
        <ul className="endpoint-list">
          {d.endpoints.map((e) => (
            <li key={e.url} className="endpoint">
              <code className="endpoint-url">{e.url}</code>
              <span className="endpoint-port">port {e.internalPort}</span>
              <span className={`badge ${e.ready ? "status-online" : "status-maintenance"}`}>{e.ready ? "answering" : "waiting for the port"}</span>
              <span className="endpoint-actions">
                <CopyButton text={e.url} label={`the address of port ${e.internalPort}`} />
                <a className="button" href={e.url} target="_blank" rel="noopener noreferrer" aria-label={`Open port ${e.internalPort} in a new tab`}>
                  Open
                </a>
              </span>
            </li>
          ))}
        </ul>
      )}
      {d.tcpPorts.length > 0 && (
        <>
          <h3>TCP ports</h3>
          <p className="muted">Raw TCP through the control plane, never from the internet: forward one to your machine with the CLI.</p>
          <ul className="endpoint-list">
            {d.tcpPorts.map((port) => {
              const command = `cm port-forward ${d.id} ${port}:${port}`;
              return (
                <li key={port} className="endpoint">
                  <span className="endpoint-port">port {port}</span>
                  <code className="endpoint-url">{command}</code>
                  <span className="endpoint-actions">
                    <CopyButton text={command} label={`the port-forward command for port ${port}`} />
                  </span>
                </li>
              );
            })}
          </ul>
        </>
      )}
    </section>
  );
}
