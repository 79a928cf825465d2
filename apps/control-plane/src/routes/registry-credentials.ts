import {
  CreateRegistryCredentialRequest,
  REGISTRY_CREDENTIALS_MAX,
  REGISTRY_PASSWORD_MAX_LENGTH,
  RegistryCredentialListResponse,
  RegistryCredentialResponse,
  SuccessResponse,
} from "@cm/protocol";
import type { Deps } from "../deps";
import { createRouter, IdParams, json, jsonBody, type RouteFactory } from "../http/route";
import { presentRegistryCredential } from "../services/registry-credentials";

/** Your logins to private registries; mounted at /registry-credentials. Every route needs a bearer token. */
export function registryCredentialRoutes(deps: Deps, route: RouteFactory) {
  const tags = ["registry-credentials"];
  const svc = deps.registryCredentials;
  return createRouter()
    .openapi(
      route(
        {
          method: "post",
          path: "/",
          operationId: "createRegistryCredential",
          tags,
          summary: "Store a login to a private registry",
          description: `The password (or access token, up to ${REGISTRY_PASSWORD_MAX_LENGTH} characters) is sealed with AES-256-GCM under the installation's key and never shown back or logged; it is opened only to go to the node that pulls a deployment's image, inside the command that starts that deployment (POST /deployments with registryCredentialId). It is not checked against the registry here: a wrong one fails the deployment with the registry's reason. One account stores at most ${REGISTRY_CREDENTIALS_MAX}.`,
          request: { body: jsonBody(CreateRegistryCredentialRequest) },
          responses: { 201: json(RegistryCredentialResponse, "The credential, without its password") },
        },
        { auth: true, errors: ["REGISTRY_CREDENTIAL_QUOTA_EXCEEDED", "REGISTRY_CREDENTIALS_NOT_CONFIGURED"] },
      ),
      async (c) => c.json({ credential: presentRegistryCredential(await svc.create(c.get("user").id, c.req.valid("json"))) }, 201),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/",
          operationId: "listRegistryCredentials",
          tags,
          summary: "Your registry logins, oldest first, without their passwords",
          description: "Each with its registry, user name and when it was last sent to a node to pull an image; never the password, sealed or not.",
          responses: { 200: json(RegistryCredentialListResponse, "Your credentials") },
        },
        { auth: true },
      ),
      async (c) => c.json({ credentials: (await svc.list(c.get("user").id)).map(presentRegistryCredential) }, 200),
    )
    .openapi(
      route(
        {
          method: "delete",
          path: "/{id}",
          operationId: "deleteRegistryCredential",
          tags,
          summary: "Delete a registry login",
          description:
            "Only your own: another account's id answers REGISTRY_CREDENTIAL_NOT_FOUND. Deployments that named it keep running; one started after this pulls its image (if the node does not hold it) without a login.",
          request: { params: IdParams },
          responses: { 200: json(SuccessResponse, "Deleted") },
        },
        { auth: true, errors: ["REGISTRY_CREDENTIAL_NOT_FOUND"] },
      ),
      async (c) => {
        await svc.remove(c.req.valid("param").id, c.get("user").id);
        return c.json({ success: true, message: "registry credential deleted" }, 200);
      },
    );
}
