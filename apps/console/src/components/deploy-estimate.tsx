import type { CreateDeploymentRequest, DeploymentEstimateResponse } from "@cm/sdk";
import { useEffect, useRef, useState } from "react";
import { useApi } from "../api/api-context";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { dollarsPerHour } from "./format";
import { PlacementRefusal } from "./placement-refusal";

/** The estimate is asked again this long after the last change: typing a port asks once, not per keystroke. */
const ESTIMATE_DELAY_MS = 400;

export interface Estimate {
  estimate?: DeploymentEstimateResponse;
  error?: unknown;
}

/** POST /deployments/estimate of the body as it is now, asked again after each change; empty while none has answered for this body. */
export function useEstimate(body: CreateDeploymentRequest | undefined): Estimate {
  const api = useApi();
  const key = body ? JSON.stringify(body) : "";
  const [state, setState] = useState<Estimate & { key: string }>({ key: "" });
  const latest = useRef(body);
  latest.current = body;
  useEffect(() => {
    if (!key || !latest.current) return;
    let current = true;
    const timer = setTimeout(() => {
      api.deployments.estimate(latest.current!).then(
        (estimate) => current && setState({ key, estimate }),
        (error: unknown) => current && setState({ key, error }),
      );
    }, ESTIMATE_DELAY_MS);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [key, api]);
  return state.key === key ? state : {};
}

function nodeName(id: string, list: Array<{ id: string; name: string }> | undefined): string {
  const n = list?.find((x) => x.id === id);
  return n ? `${n.name} (${id})` : id;
}

/**
 * What deploying would do now, against the balance: the node, the price, the hour it holds and
 * what it holds of the node; or why it would be refused (no node fits, credits short), or what
 * to fix in the form first.
 */
export function DeployEstimate({
  problem,
  estimate: { estimate: est, error },
  available,
  nodes,
}: {
  problem: string | undefined;
  estimate: Estimate;
  available: number | undefined;
  nodes: Array<{ id: string; name: string }> | undefined;
}) {
  return (
    <section className="estimate" aria-labelledby="estimate-title" aria-live="polite">
      <h2 id="estimate-title">Estimate</h2>
      {problem ? (
        <p className="form-problem">{problem}</p>
      ) : error ? (
        <ErrorNotice error={error} />
      ) : !est ? (
        <Loading label="Estimating…" />
      ) : (
        <>
          <dl className="facts">
            <dt>Node</dt>
            <dd>{est.nodeId ? nodeName(est.nodeId, nodes) : "none fits"}</dd>
            <dt>Price</dt>
            <dd>{est.hourlyRateCents === null ? "not known" : `${dollarsPerHour(est.hourlyRateCents)} (${est.hourlyRateCents} credits an hour)`}</dd>
            <dt>Held while it runs</dt>
            <dd>{est.holdCredits === null ? "not known" : `${est.holdCredits} credits (one hour)`}</dd>
            <dt>Your balance</dt>
            <dd>{available === undefined ? "…" : `${available} credits available`}</dd>
            {est.gpuCount !== null && (
              <>
                <dt>It holds</dt>
                <dd>
                  {est.gpuCount} GPU{est.gpuCount === 1 ? "" : "s"}, {est.cpuCores} CPU cores, {est.memoryMb} MB memory
                  {est.diskGb !== null ? `, ${est.diskGb} GB disk` : ""}
                </dd>
              </>
            )}
          </dl>
          {!est.fits && est.refusal ? <PlacementRefusal refusal={est.refusal} live /> : <p className="fits">It fits: deploying now runs it there.</p>}
        </>
      )}
    </section>
  );
}
