/** Reported in hello; bump with every agent release the control plane should tell apart. */
export const AGENT_VERSION = "0.2.0";
