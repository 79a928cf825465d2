import type { RegistryCredentialRow, Repos } from "@cm/db";
import {
  type CreateRegistryCredentialRequest,
  imageRegistry,
  normalizeRegistry,
  REGISTRY_CREDENTIALS_MAX,
  type RegistryAuth,
  type RegistryCredential,
} from "@cm/protocol";
import { ApiError } from "../errors";
import type { Clock, IdGenerator } from "./ids";
import type { Logger } from "./logger";
import type { RegistrySecrets } from "./registry-secrets";

const iso = (ms: number) => new Date(ms).toISOString();

/** The API's shape: never the secret, sealed or not. */
export const presentRegistryCredential = (r: RegistryCredentialRow): RegistryCredential => ({
  id: r.id,
  registry: r.registry,
  username: r.username,
  createdAt: iso(r.createdAt),
  lastUsedAt: r.lastUsedAt === null ? null : iso(r.lastUsedAt),
});

export type RegistryCredentialsOptions = {
  repos: Repos;
  clock: Clock;
  ids: IdGenerator;
  log: Logger;
  /** Absent: no key to seal with (PostgreSQL without REGISTRY_CREDENTIALS_KEY). */
  secrets: RegistrySecrets | undefined;
};

/** Tenants' registry logins: stored sealed, listed without the secret, opened only for the start command that pulls with one. */
export function createRegistryCredentials({ repos, clock, ids, log, secrets }: RegistryCredentialsOptions) {
  return {
    async create(userId: string, body: CreateRegistryCredentialRequest): Promise<RegistryCredentialRow> {
      if (!secrets) throw new ApiError("REGISTRY_CREDENTIALS_NOT_CONFIGURED");
      const id = ids("rcred");
      const created = await repos.registryCredentials.create(
        {
          id,
          userId,
          registry: normalizeRegistry(body.registry),
          username: body.username,
          secretSealed: secrets.seal(id, body.password),
          createdAt: clock.now(),
        },
        REGISTRY_CREDENTIALS_MAX,
      );
      if ("refused" in created)
        throw new ApiError("REGISTRY_CREDENTIAL_QUOTA_EXCEEDED", `you already store ${REGISTRY_CREDENTIALS_MAX} registry credentials; delete one first`);
      return created;
    },

    list: (userId: string) => repos.registryCredentials.list(userId),

    async remove(id: string, userId: string) {
      if (!(await repos.registryCredentials.remove(id, userId))) throw new ApiError("REGISTRY_CREDENTIAL_NOT_FOUND", `no registry credential ${id}`);
    },

    /** The credential a new deployment names is the tenant's and is for the image's registry; else the API's refusal. */
    async checkFor(userId: string, id: string, image: string): Promise<void> {
      const row = await repos.registryCredentials.get(id, userId);
      if (!row) throw new ApiError("REGISTRY_CREDENTIAL_NOT_FOUND", `no registry credential ${id}`);
      const registry = imageRegistry(image);
      if (row.registry !== registry)
        throw new ApiError(
          "REGISTRY_CREDENTIAL_MISMATCH",
          `registry credential ${id} is for ${row.registry}, and ${image} is pulled from ${registry}: give a credential for ${registry}, or none`,
          { registry: row.registry, imageRegistry: registry },
        );
    },

    /**
     * The login for a start command, opened now; undefined when it was deleted or
     * does not open (the key changed): the node then pulls anonymously and the
     * registry's refusal is the deployment's reason.
     */
    async authFor(id: string): Promise<RegistryAuth | undefined> {
      const row = await repos.registryCredentials.get(id);
      if (!row) return undefined;
      let password: string;
      try {
        if (!secrets) throw new Error("no REGISTRY_CREDENTIALS_KEY");
        password = secrets.open(row.id, row.secretSealed);
      } catch (error) {
        // The operator's to fix; the message is the cipher's, never the secret.
        log.warn("registry credential: cannot open it with this key (was REGISTRY_CREDENTIALS_KEY changed?)", {
          credentialId: id,
          error: (error as Error).message,
        });
        return undefined;
      }
      await repos.registryCredentials.markUsed(id, clock.now());
      return { serveraddress: row.registry, username: row.username, password };
    },
  };
}
export type RegistryCredentials = ReturnType<typeof createRegistryCredentials>;
