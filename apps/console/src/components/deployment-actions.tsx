import { type Deployment, ENDED_STATUSES } from "@cm/sdk";
import { useEffect, useRef, useState } from "react";
import { useApi } from "../api/api-context";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";

/** The statuses stop accepts (the protocol's TENANT_ACTIONS.stop): a pull or a start that hangs can be stopped too. */
const STOPPABLE: readonly string[] = ["pending", "pulling", "starting", "running"];
const STARTABLE: readonly string[] = ENDED_STATUSES;

type Action = "stop" | "start" | "delete";
const DOING: Record<Action, string> = { stop: "Stopping…", start: "Starting…", delete: "Deleting…" };

/**
 * Stop, start and delete: each shows that it is under way and, when the API refuses, its
 * message and what to do. Delete asks first, in a modal dialog (focus stays in it; Escape cancels).
 */
export function DeploymentActions({
  deployment: d,
  onChanged,
  onDeleted,
}: {
  deployment: Deployment;
  onChanged: (d: Deployment) => void;
  onDeleted: () => void;
}) {
  const api = useApi();
  const [busy, setBusy] = useState<Action>();
  const [error, setError] = useState<unknown>();
  const [confirming, setConfirming] = useState(false);
  const dialog = useRef<HTMLDialogElement>(null);

  useEffect(() => {
    const el = dialog.current;
    if (!el) return;
    if (confirming && !el.open) el.showModal();
    if (!confirming && el.open) el.close();
  }, [confirming]);

  const run = async (action: Action) => {
    setBusy(action);
    setError(undefined);
    try {
      if (action === "delete") {
        await api.deployments.remove(d.id);
        setConfirming(false);
        onDeleted();
        return;
      }
      const { deployment } = action === "stop" ? await api.deployments.stop(d.id) : await api.deployments.start(d.id);
      onChanged(deployment);
    } catch (err) {
      setError(err);
      setConfirming(false);
    } finally {
      setBusy(undefined);
    }
  };

  return (
    <section className="deployment-actions" aria-label="Actions">
      <div className="action-buttons">
        <button type="button" onClick={() => run("stop")} disabled={busy !== undefined || !STOPPABLE.includes(d.status)}>
          Stop
        </button>
        <button type="button" onClick={() => run("start")} disabled={busy !== undefined || !STARTABLE.includes(d.status)}>
          Start
        </button>
        <button type="button" className="danger" onClick={() => setConfirming(true)} disabled={busy !== undefined}>
          Delete…
        </button>
      </div>
      {busy && busy !== "delete" && <Loading label={DOING[busy]} />}
      <ErrorNotice error={error} />
      <dialog ref={dialog} aria-labelledby="delete-title" onClose={() => setConfirming(false)} className="confirm">
        <h2 id="delete-title">Delete {d.name ?? d.id}?</h2>
        <p>Its container and the files in it are removed, and it cannot be started again. Charges stop; what it cost so far stays in your history.</p>
        {busy === "delete" && <Loading label={DOING.delete} />}
        <div className="action-buttons">
          <button type="button" className="danger" onClick={() => run("delete")} disabled={busy !== undefined}>
            Delete deployment
          </button>
          <button type="button" onClick={() => setConfirming(false)} disabled={busy === "delete"}>
            Cancel
          </button>
        </div>
      </dialog>
    </section>
  );
}
