import type { RouteScope } from "../services/auth-service";

/**
 * What each route that needs a bearer asks of an API key, by operationId: the
 * one place a route's scope is said. The route factory enforces it and writes
 * it into the document as the operation's `x-scope`. A route
 * missing here takes `session`: a new route is closed to keys until it is
 * given a scope, never opened by accident.
 */
export const ROUTE_SCOPES: Readonly<Record<string, RouteScope>> = {
  // Whose credential this is: any key may ask.
  getMe: "any",
  // Keys are managed only by a signed-in wallet: a leaked key cannot mint others or hide itself.
  createApiKey: "session",
  listApiKeys: "session",
  deleteApiKey: "session",

  listCreditPackages: "read",
  getBalance: "read",
  getDeposit: "read",
  listTransactions: "read",
  // A deposit credits the account from the wallet's own signed transfer: the key only files it.
  initiateDeposit: "deploy",
  confirmDeposit: "deploy",

  listDeployments: "read",
  getDeployment: "read",
  estimateDeployment: "read",
  getDeploymentLogs: "read",
  streamDeploymentLogs: "read",
  streamDeploymentEvents: "read",
  // A deployment's files are read as its logs are.
  getDeploymentFiles: "read",
  createDeployment: "deploy",
  startDeployment: "deploy",
  stopDeployment: "deploy",
  deleteDeployment: "deploy",
  execInDeployment: "deploy",
  connectToDeploymentTcpPort: "deploy",

  listRegistryCredentials: "read",
  createRegistryCredential: "deploy",
  deleteRegistryCredential: "deploy",

  registerNode: "operator",
  listOperatorNodes: "operator",
  updateNode: "operator",
  setNodeMaintenance: "operator",
  listNodeDeployments: "operator",
  retireNode: "operator",
  getOperatorEarnings: "operator",
  listOperatorEarnings: "operator",
  listPayouts: "operator",
  getPayout: "operator",
  // Money out: never granted unless a key is created with it by name.
  requestPayout: "payouts",
};

/** The scope `operationId` needs of a key (session when it names none). */
export const scopeOf = (operationId: string | undefined): RouteScope => (operationId && ROUTE_SCOPES[operationId]) || "session";
