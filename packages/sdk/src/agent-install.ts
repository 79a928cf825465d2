/**
 * The one line that enrols a GPU server from a release's files alone: run in a directory holding
 * the release's install-cm-agent.sh, its cm-agent tarball and SHA256SUMS (the agent's guide,
 * "Install from a release"), with no `cm` and no wallet on that machine. `cm operator add` prints
 * it and the web console shows it, so both say the same.
 *
 * The token goes in the environment, never in an argument: every user of the machine reads
 * arguments with `ps`. sudo drops the environment unless told to keep a variable;
 * --preserve-env=NAME keeps the token out of sudo's own arguments.
 */
export const agentInstallCommand = (controlPlaneUrl: string, agentToken: string) =>
  `AGENT_TOKEN=${agentToken} sudo --preserve-env=AGENT_TOKEN bash install-cm-agent.sh --control-plane ${controlPlaneUrl}`;
