// Image references as the tenant typed them ("pytorch/pytorch", "ghcr.io/x/y:1.2",
// "localhost:5000/app@sha256:..."), read the same by the agent (which local copy
// a deployment runs) and the control plane (which of a node's reported images it names).

/** True when the reference names a tag or digest. A registry port ("host:5000/app") is not a tag. */
export function hasTagOrDigest(ref: string): boolean {
  if (ref.includes("@")) return true;
  const lastComponent = ref.slice(ref.lastIndexOf("/") + 1);
  return lastComponent.includes(":");
}

/** Names under which a local copy may be stored: as given, and with ":latest" when untagged. */
export function localImageCandidates(ref: string): string[] {
  return hasTagOrDigest(ref) ? [ref] : [ref, `${ref}:latest`];
}

/** Docker Hub's names: an image with no registry in its name is pulled from it, and a credential for any of these is one for it. */
export const DOCKER_HUB_REGISTRY = "docker.io";
const DOCKER_HUB_ALIASES = new Set(["docker.io", "index.docker.io", "registry-1.docker.io"]);

/** A registry as compared: host[:port] lowercased, Docker Hub's aliases as docker.io. */
export function normalizeRegistry(registry: string): string {
  const lower = registry.toLowerCase();
  return DOCKER_HUB_ALIASES.has(lower) ? DOCKER_HUB_REGISTRY : lower;
}

/**
 * The registry an image is pulled from, as Docker reads a reference: the first
 * path component when it has a dot or a port or is localhost ("ghcr.io/x/y",
 * "127.0.0.1:5000/app"), else Docker Hub ("ubuntu", "pytorch/pytorch").
 */
export function imageRegistry(ref: string): string {
  const slash = ref.indexOf("/");
  if (slash === -1) return DOCKER_HUB_REGISTRY;
  const first = ref.slice(0, slash);
  const isHost = /[.:]/.test(first) || first === "localhost" || first !== first.toLowerCase();
  return isHost ? normalizeRegistry(first) : DOCKER_HUB_REGISTRY;
}
