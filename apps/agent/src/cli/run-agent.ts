// The daemon's life: start the agent, stop it on SIGTERM/SIGINT (leaving every
// container running), and tell systemd through the exit code whether a restart
// can help.

import type { AgentDeps } from "../agent";
import { createAgent } from "../agent";
import type { AgentConfig } from "../config";
import { EXIT_CONFIG } from "../install/systemd-unit";
import { StatusFile } from "../state-file";
import { AGENT_VERSION } from "../version";

export type SignalSource = (handler: (signal: string) => void) => () => void;

/** Resolves with the exit code once the agent has stopped. */
export function runAgentUntilSignal(config: AgentConfig, deps: AgentDeps, onSignal: SignalSource): Promise<number> {
  const agent = createAgent(config, deps);
  const { logger } = deps;
  if (config.stateDir) {
    const status = new StatusFile(config.stateDir, { pid: process.pid, agentVersion: AGENT_VERSION, state: agent.state }, deps.clock, logger);
    agent.connection.onStateChange((state) =>
      status.update({ state, ...(state === "ready" ? { nodeId: agent.connection.welcome?.nodeId, failure: undefined } : {}) }),
    );
    agent.onFailure((failure) => status.update({ failure: failure.explanation }));
  }
  return new Promise((resolve) => {
    let stopping = false;
    const stopWith = (code: number) => {
      if (stopping) return;
      stopping = true;
      removeSignalHandler();
      agent.stop().then(
        () => resolve(code),
        (error: unknown) => {
          logger.error("Stopping the agent failed", { error });
          resolve(code || 1);
        },
      );
    };
    // A second signal (systemd and tsx may both deliver one) must not kill the agent mid-close.
    const removeSignalHandler = onSignal((signal) => {
      logger.info(`Received ${signal}: closing the connection; containers keep running`);
      stopWith(0);
    });
    agent.onFailure(() => stopWith(EXIT_CONFIG));
    // Everything it ran is removed: as with a rejected token, a restart cannot help.
    agent.onRetired(() => stopWith(EXIT_CONFIG));
    agent.start().catch((error: unknown) => {
      logger.error("The agent cannot start: is Docker running and is its socket reachable?", { socket: config.dockerSocket, error });
      stopWith(1);
    });
  });
}
