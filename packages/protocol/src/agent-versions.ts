/**
 * Which agents this control plane still serves and which it would rather see: the
 * operator's node list flags the rest (issue 28). Agents speak their version in hello.
 * Raise RECOMMENDED_AGENT_VERSION with each agent release that fixes something an
 * operator should not run without; MIN_SUPPORTED_AGENT_VERSION when an older agent
 * lacks something the control plane relies on (it still connects while its protocol
 * version is spoken, but some features fail on it).
 */
export const MIN_SUPPORTED_AGENT_VERSION = "0.1.0";
export const RECOMMENDED_AGENT_VERSION = "0.2.0";

/** What the node list says of an agent's version: nothing to do, an upgrade recommended, or one required. */
export const AGENT_UPDATE_LEVELS = ["none", "recommended", "required"] as const;
export type AgentUpdateLevel = (typeof AGENT_UPDATE_LEVELS)[number];

/** major.minor.patch as numbers; a pre-release or build suffix (`-rc.1`, `+test.1`) is ignored. Undefined when it is no version. */
export function versionParts(version: string): [number, number, number] | undefined {
  const m = /^v?(\d{1,9})\.(\d{1,9})\.(\d{1,9})(?:[-+].*)?$/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

/** Negative when a is older than b, 0 when the same release, positive when newer; undefined when either is no version. */
export function compareVersions(a: string, b: string): number | undefined {
  const [pa, pb] = [versionParts(a), versionParts(b)];
  if (!pa || !pb) return undefined;
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}

/**
 * How urgently an agent reporting `version` should be upgraded. An agent that never said
 * (null: not connected since versions were kept) is not judged; a version that does not
 * parse is "required": nothing released says that.
 */
export function agentUpdateLevel(version: string | null): AgentUpdateLevel | null {
  if (version === null) return null;
  const toMin = compareVersions(version, MIN_SUPPORTED_AGENT_VERSION);
  if (toMin === undefined || toMin < 0) return "required";
  return (compareVersions(version, RECOMMENDED_AGENT_VERSION) ?? -1) < 0 ? "recommended" : "none";
}
