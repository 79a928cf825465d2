/**
 * The lists a command line shows and checks (regions, statuses, categories), without zod:
 * `cm nodes` and `cm --version` load this and never the schemas (apps/cli's "what a
 * command loads" test). The schemas are built from these same lists.
 */
export const REGIONS = ["us-east", "us-west", "eu-west", "eu-central", "asia-east", "asia-south"] as const;
export type Region = (typeof REGIONS)[number];
export const NODE_STATUSES = ["online", "offline", "maintenance"] as const;

/**
 * Every status a deployment can have. The spec names pending, starting, running,
 * stopping and "a stopped state"; the rest are ours (see deployment-states.ts).
 */
export const DEPLOYMENT_STATUSES = ["pending", "pulling", "starting", "running", "stopping", "stopped", "exited", "failed"] as const;

export const TEMPLATE_CATEGORIES = ["llm", "image", "notebook", "utility", "custom"] as const;

/**
 * What an API key may do. A route names the one scope it needs (apps/control-plane's
 * http/scopes.ts); a signed-in wallet session may do everything, keys included.
 * `payouts` moves money out, so it is only ever granted when asked for by name.
 */
export const API_KEY_SCOPES = ["read", "deploy", "operator", "payouts"] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];
/** What `cm auth keys create` grants when no --scope is given: never `payouts`. */
export const DEFAULT_API_KEY_SCOPES: readonly ApiKeyScope[] = ["read"];
