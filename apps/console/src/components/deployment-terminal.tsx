import { useEffect, useRef, useState } from "react";
import { useApi } from "../api/api-context";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import type { TerminalHandle } from "./terminal-xterm";

/** bash where the image has it, else sh: the tty gets the best shell there is. */
const SHELL = ["sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"];

/**
 * A shell in the running container: xterm.js (loaded when opened, not before) over the
 * SDK's exec, a WebSocket whose access token rides as a subprotocol; a tty, resized with
 * its box.
 */
export function DeploymentTerminal({ id, running }: { id: string; running: boolean }) {
  const api = useApi();
  const [open, setOpen] = useState(false);
  const [state, setState] = useState<"loading" | "open" | "ended">("loading");
  const [ended, setEnded] = useState<string>();
  const [error, setError] = useState<unknown>();
  const host = useRef<HTMLDivElement>(null);
  const handle = useRef<TerminalHandle | undefined>(undefined);

  useEffect(() => {
    if (!open) return;
    let cancelled = false;
    setState("loading");
    setEnded(undefined);
    setError(undefined);
    import("./terminal-xterm").then(
      ({ openTerminal }) => {
        if (cancelled || !host.current) return;
        handle.current = openTerminal(
          host.current,
          ({ cols, rows }, onOutput) => {
            const session = api.deployments.exec(id, { command: SHELL, tty: true, cols, rows, onStdout: onOutput, onStderr: onOutput });
            session.opened.then(
              () => !cancelled && setState("open"),
              (err: unknown) => {
                if (cancelled) return;
                setError(err);
                setState("ended");
              },
            );
            return session;
          },
          (message) => {
            if (cancelled) return;
            setEnded(message);
            setState("ended");
          },
        );
      },
      (err: unknown) => !cancelled && setError(err),
    );
    return () => {
      cancelled = true;
      handle.current?.dispose();
      handle.current = undefined;
    };
  }, [open, api, id]);

  return (
    <section className="deployment-terminal" aria-labelledby="terminal-heading">
      <div className="section-head">
        <h2 id="terminal-heading">Terminal</h2>
        {!open ? (
          <button type="button" onClick={() => setOpen(true)} disabled={!running}>
            Open terminal
          </button>
        ) : (
          <button type="button" onClick={() => setOpen(false)}>
            Close terminal
          </button>
        )}
      </div>
      {!running && !open && <p className="muted">A shell opens in a running deployment.</p>}
      {open && state === "loading" && !error && <Loading label="Opening a shell…" />}
      <ErrorNotice error={error} />
      {ended && !error && (
        <p role="status" className="muted">
          {ended}
        </p>
      )}
      {open && <div ref={host} className="terminal-host" />}
    </section>
  );
}
