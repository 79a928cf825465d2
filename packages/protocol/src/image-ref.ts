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
