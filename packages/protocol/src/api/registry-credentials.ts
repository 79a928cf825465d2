import { z } from "zod";
import { labelText, Timestamp, text } from "./common";

/** Registry credentials one account may store: far more registries than a tenant pulls from. */
export const REGISTRY_CREDENTIALS_MAX = 100;
/** A password or token: registries' tokens are far shorter; a service-account key file (GCR's _json_key) is about 2.5 KiB. */
export const REGISTRY_PASSWORD_MAX_LENGTH = 8192;
/** A DNS name's longest, and a port. */
const REGISTRY_MAX_LENGTH = 253 + 6;
const LABEL = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";
/** host[:port] as an image reference names its registry: ghcr.io, registry.example.com:5000, 127.0.0.1:5000. */
export const REGISTRY_PATTERN = `^${LABEL}(?:\\.${LABEL})*(?::[0-9]{1,5})?$`;

export const RegistryHost = z
  .string()
  .min(1)
  .max(REGISTRY_MAX_LENGTH)
  .regex(new RegExp(REGISTRY_PATTERN), "must be a registry's host[:port] as an image reference names it, such as ghcr.io or 127.0.0.1:5000")
  .meta({
    description:
      "the registry's host[:port] as image references name it (ghcr.io, registry.example.com:5000); docker.io for Docker Hub. Stored lowercased, with index.docker.io and registry-1.docker.io as docker.io",
  });

export const CreateRegistryCredentialRequest = z.strictObject({
  registry: RegistryHost,
  username: labelText(255)
    .min(1)
    .meta({ description: "the registry user name (for a token: what the registry asks, e.g. any name on ghcr.io, _json_key on GCR)" }),
  password: text()
    .min(1)
    .max(REGISTRY_PASSWORD_MAX_LENGTH)
    .meta({
      description: `the password or access token (at most ${REGISTRY_PASSWORD_MAX_LENGTH} characters). Stored sealed (AES-256-GCM), never shown back, never logged; opened only to go to the node that pulls a deployment's image, inside that deployment's start command`,
    }),
});
export type CreateRegistryCredentialRequest = z.infer<typeof CreateRegistryCredentialRequest>;

export const RegistryCredential = z
  .object({
    id: z.string(),
    registry: z.string(),
    username: z.string(),
    createdAt: Timestamp,
    lastUsedAt: Timestamp.nullable().meta({ description: "when it was last sent to a node to pull an image; null: never" }),
  })
  .meta({ id: "RegistryCredential", description: "A stored registry login, without its password" });
export type RegistryCredential = z.infer<typeof RegistryCredential>;

export const RegistryCredentialResponse = z.object({ credential: RegistryCredential });
export const RegistryCredentialListResponse = z.object({ credentials: z.array(RegistryCredential) });
