import { ApiError, type Deployment, type DeploymentStatus, hasEnded } from "@cm/sdk";
import { useCallback, useEffect, useRef, useState } from "react";
import { useApi } from "../api/api-context";

/** One step of the status timeline: a status the deployment reached, why, and when. */
export interface TimelineStep {
  status: DeploymentStatus | "created";
  reason: string | null;
  exitCode: number | null;
  /** When it happened (the API's timestamps), or when this page saw it change (`seen`). */
  at: string;
  seen: boolean;
}

/** While a deployment rests in an ended status, how often it is read again, in case it is started from elsewhere (the CLI, another tab). */
const ENDED_POLL_MS = 3_000;
/** The timeline keeps this many steps (a deployment restarting on failure makes many). */
const TIMELINE_MAX = 50;

/**
 * The API keeps no history of a deployment's moves: what it gives is the deployment's
 * timestamps (createdAt, startedAt, stoppedAt) and its events stream, the deployment each
 * time it changes. The timeline is the first, then every status change the stream shows
 * while the page is open.
 */
function initialTimeline(d: Deployment): TimelineStep[] {
  const steps: TimelineStep[] = [{ status: "created", reason: null, exitCode: null, at: d.createdAt, seen: false }];
  if (d.startedAt) steps.push({ status: "running", reason: null, exitCode: null, at: d.startedAt, seen: false });
  if (d.stoppedAt && hasEnded(d.status)) steps.push({ status: d.status, reason: d.statusReason, exitCode: d.exitCode, at: d.stoppedAt, seen: false });
  else if (d.status !== "running" || !d.startedAt)
    steps.push({ status: d.status, reason: d.statusReason, exitCode: d.exitCode, at: new Date().toISOString(), seen: true });
  return steps;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

export interface DeploymentLive {
  deployment: Deployment | undefined;
  timeline: TimelineStep[];
  /** The last read's error (shown; the page keeps reading). */
  error: unknown;
  /** The deployment is gone (deleted here or elsewhere). */
  gone: boolean;
  /** Takes an action's answer at once and reads the stream again (a started deployment's stream had ended). */
  update: (d: Deployment) => void;
}

/**
 * A deployment kept live: the SDK's watch (the events stream, which resumes by itself
 * across dropped connections) while it is live; once it has ended (the stream ends
 * there), read every few seconds until it is live again, then watched again.
 */
export function useDeploymentLive(id: string): DeploymentLive {
  const api = useApi();
  const [deployment, setDeployment] = useState<Deployment>();
  const [timeline, setTimeline] = useState<TimelineStep[]>([]);
  const [error, setError] = useState<unknown>();
  const [gone, setGone] = useState(false);
  const [round, setRound] = useState(0);
  const last = useRef<{ status: string; reason: string | null } | undefined>(undefined);

  const take = useCallback((d: Deployment) => {
    setDeployment(d);
    setError(undefined);
    const before = last.current;
    last.current = { status: d.status, reason: d.statusReason };
    if (!before) return setTimeline(initialTimeline(d));
    if (before.status === d.status && before.reason === d.statusReason) return;
    const step: TimelineStep = { status: d.status, reason: d.statusReason, exitCode: d.exitCode, at: new Date().toISOString(), seen: true };
    setTimeline((t) => [...t, step].slice(-TIMELINE_MAX));
  }, []);

  // biome-ignore lint/correctness/useExhaustiveDependencies: round asks for a new watch (after a start)
  useEffect(() => {
    const ctrl = new AbortController();
    const { signal } = ctrl;
    const isGone = (err: unknown) => err instanceof ApiError && (err.code === "DEPLOYMENT_NOT_FOUND" || err.code === "NOT_FOUND");
    void (async () => {
      while (!signal.aborted) {
        try {
          for await (const d of api.deployments.watch(id, { signal })) take(d);
          if (signal.aborted) return;
          // Ended: the stream is over; read until someone starts it again.
          for (;;) {
            await sleep(ENDED_POLL_MS, signal);
            if (signal.aborted) return;
            const { deployment: d } = await api.deployments.get(id);
            take(d);
            if (!hasEnded(d.status)) break;
          }
        } catch (err) {
          if (signal.aborted) return;
          if (isGone(err)) return setGone(true);
          setError(err);
          await sleep(ENDED_POLL_MS, signal);
        }
      }
    })();
    return () => ctrl.abort();
  }, [api, id, take, round]);

  const update = useCallback(
    (d: Deployment) => {
      take(d);
      setRound((n) => n + 1);
    },
    [take],
  );
  return { deployment, timeline, error, gone, update };
}
