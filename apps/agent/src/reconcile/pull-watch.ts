// How long an image pull may hold a node. A pull is not billed, yet it holds the
// deployment's GPUs, cores and memory: a registry that sends one byte every two
// seconds held a 2-core node for 19 minutes for nothing. A pull ends at its
// deadline, or once Docker has reported no progress for a while (Docker reports
// a downloading layer every 512 KB or so, so a trickle below that is no
// progress), or at once when the deployment is wanted otherwise (stopped,
// deleted, started again).
import type { Clock } from "../clock";

export interface PullLimits {
  /** the whole pull, AGENT_PULL_TIMEOUT_S */
  timeoutMs: number;
  /** the longest wait between two progress reports, AGENT_PULL_STALL_S */
  stallMs: number;
}

export const DEFAULT_PULL_TIMEOUT_S = 1800;
export const DEFAULT_PULL_STALL_S = 120;

/** Why a pull was ended on purpose: the tenant reads `message`. */
export class PullLimitError extends Error {
  override readonly name = "PullLimitError";
}

export interface PullWatch {
  /** aborted at the deadline, after a stall, or with `interrupted` (a newer desired state came); its reason says which */
  readonly signal: AbortSignal;
  /** Docker reported progress: the stall timer starts again */
  progressed(): void;
  /** the pull is over: no timer fires after this */
  done(): void;
}

export function watchPull(clock: Clock, limits: PullLimits, image: string, interrupted?: AbortSignal): PullWatch {
  const controller = new AbortController();
  const seconds = (ms: number) => Math.round(ms / 1000);
  const end = (reason: Error) => {
    clock.clearTimeout(deadline);
    clock.clearTimeout(stall);
    if (!controller.signal.aborted) controller.abort(reason);
  };
  const onStall = () =>
    end(
      new PullLimitError(
        `the pull of image "${image}" made no progress for ${seconds(limits.stallMs)} s (the node's limit, AGENT_PULL_STALL_S): the registry stopped sending; the deployment holds nothing now`,
      ),
    );
  const deadline = clock.setTimeout(
    () =>
      end(
        new PullLimitError(
          `the pull of image "${image}" did not finish within ${seconds(limits.timeoutMs)} s (the node's limit, AGENT_PULL_TIMEOUT_S); the deployment holds nothing now`,
        ),
      ),
    limits.timeoutMs,
  );
  let stall = clock.setTimeout(onStall, limits.stallMs);
  return {
    signal: interrupted ? AbortSignal.any([interrupted, controller.signal]) : controller.signal,
    progressed() {
      if (controller.signal.aborted || interrupted?.aborted) return;
      clock.clearTimeout(stall);
      stall = clock.setTimeout(onStall, limits.stallMs);
    },
    done: () => {
      clock.clearTimeout(deadline);
      clock.clearTimeout(stall);
    },
  };
}
