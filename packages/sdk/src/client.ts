import { type BuyOptions, buyCredits, type Payer } from "./chain";
import { type DepositWaitOptions, waitForDeposit } from "./deposits";
import { ApiError } from "./errors";
import { type ExecOptions, exec } from "./exec";
import { type FilesOptions, files } from "./files";
import { type FollowOptions, follow, type PollOptions, type WaitOptions, waitFor, watch } from "./follow";
import { type PayoutWaitOptions, waitForPayout } from "./payouts";
import { call } from "./routes";
import { type Signer, signText, walletAddress } from "./signer";
import { checkTcp, type TcpOptions, tcp } from "./tcp";
import { type ClientOptions, Transport } from "./transport";
import type * as T from "./types";

/**
 * One client for every route of the API. Protected calls use the session in
 * `store` (sign in first), refreshing it before it expires and once more when
 * the API says TOKEN_EXPIRED; or, given `apiKey`, that key on the routes its
 * scopes allow, with no session at all.
 */
export function createClient(options: ClientOptions) {
  const t = new Transport(options);
  // Every call's path, parameters, body and answer are the API document's (routes.ts): the
  // types each method declares must agree with it, or the typecheck fails.
  const auth_ = { auth: true } as const;

  const auth = {
    nonce: (walletAddress: string): Promise<T.NonceResponse> => call(t, "post", "/auth/nonce", { body: { walletAddress } }),
    verify: (body: T.VerifyRequest): Promise<T.VerifyResponse> => call(t, "post", "/auth/verify", { body }),
    /** Signs the API's sign-in message with `signer` and keeps the session in the store. */
    async signIn(signer: Signer): Promise<T.VerifyResponse> {
      const address = walletAddress(signer.publicKey);
      const { message } = await auth.nonce(address);
      const answer = await auth.verify({ walletAddress: address, message, signature: await signText(signer, message) });
      await t.store.save(answer);
      return answer;
    },
    /** Rotates the token pair now (protected calls do this by themselves). */
    refresh: () => t.refresh(),
    /** The session's access token for a request made elsewhere (curl), refreshed first when it expires within refreshBeforeMs. */
    accessToken: () => t.accessToken(),
    me: (): Promise<T.MeResponse> => call(t, "get", "/auth/me", auth_),
    /**
     * Revokes the session on the API (its refresh token's whole family) and forgets it
     * here; forgotten even when the API cannot be told (the error is thrown after).
     */
    async signOut(): Promise<void> {
      const session = await t.store.load();
      if (!session) return;
      try {
        await call(t, "post", "/auth/logout", { body: { refreshToken: session.refreshToken } });
      } catch (err) {
        // Already revoked or unknown there, or a control plane without the route: nothing left to revoke.
        const gone = err instanceof ApiError && (err.code === "INVALID_REFRESH_TOKEN" || err.code === "NOT_FOUND");
        if (!gone) {
          await t.store.clear();
          throw err;
        }
      }
      await t.store.clear();
    },
    session: () => t.store.load(),
    /** Whether protected calls send the API key given as `apiKey` rather than the stored session. */
    usesApiKey: () => t.usesApiKey,
    /**
     * API keys for scripts; only a signed-in wallet session may manage them (with a key, these throw
     * ApiError INSUFFICIENT_SCOPE). create answers the key this once: it is stored hashed.
     */
    apiKeys: {
      create: (body: T.CreateApiKeyRequest): Promise<T.CreateApiKeyResponse> => call(t, "post", "/auth/api-keys", { ...auth_, body }),
      list: (): Promise<T.ApiKeyListResponse> => call(t, "get", "/auth/api-keys", auth_),
      remove: (id: string): Promise<T.SuccessResponse> => call(t, "delete", "/auth/api-keys/{id}", { ...auth_, params: { id } }),
    },
  };

  const nodes = {
    list: (query: T.NodeListQuery = {}): Promise<T.NodeListResponse> => call(t, "get", "/nodes", { query }),
    get: (id: string): Promise<T.NodeResponse> => call(t, "get", "/nodes/{id}", { params: { id } }),
  };

  const templates = {
    list: (query: T.TemplateListQuery = {}): Promise<T.TemplateListResponse> => call(t, "get", "/templates", { query }),
    get: (idOrSlug: string): Promise<T.TemplateResponse> => call(t, "get", "/templates/{idOrSlug}", { params: { idOrSlug } }),
  };

  const deployments = {
    create: (body: T.CreateDeploymentRequest): Promise<T.CreateDeploymentResponse> => call(t, "post", "/deployments", { ...auth_, body }),
    /** What create would do with this body now (node, rate, hold, whether it fits), creating and holding nothing. */
    estimate: (body: T.CreateDeploymentRequest): Promise<T.DeploymentEstimateResponse> => call(t, "post", "/deployments/estimate", { ...auth_, body }),
    list: (query: T.DeploymentListQuery = {}): Promise<T.DeploymentListResponse> => call(t, "get", "/deployments", { ...auth_, query }),
    get: (id: string): Promise<T.DeploymentResponse> => call(t, "get", "/deployments/{id}", { ...auth_, params: { id } }),
    start: (id: string): Promise<T.DeploymentResponse> => call(t, "post", "/deployments/{id}/start", { ...auth_, params: { id } }),
    stop: (id: string): Promise<T.DeploymentResponse> => call(t, "post", "/deployments/{id}/stop", { ...auth_, params: { id } }),
    remove: (id: string): Promise<T.DeleteDeploymentResponse> => call(t, "delete", "/deployments/{id}", { ...auth_, params: { id } }),
    logs: (id: string, query: T.LogsQuery = {}): Promise<T.LogsResponse> => call(t, "get", "/deployments/{id}/logs", { ...auth_, params: { id }, query }),
    /** Resolves once the deployment has `status` (or one of them); WaitError if it ends otherwise or the time runs out. */
    waitFor: (id: string, status: T.DeploymentStatus | T.DeploymentStatus[], options?: WaitOptions) => waitFor(t, id, status, options),
    /** The deployment each time it changes, the current state first, until it has ended. */
    watch: (id: string, options?: PollOptions) => watch(t, id, options),
    /** Log lines, the last `tail` first, then as they come, until the deployment has ended; resumes across dropped connections. */
    follow: (id: string, options?: FollowOptions) => follow(t, id, options),
    /** Runs a command in the running container: stdin to write, output to callbacks, the exit code to await. */
    exec: (id: string, options: ExecOptions) => exec(t, id, options),
    /** A TCP connection to one of the running deployment's tcpPorts (what cm port-forward opens): bytes to write, bytes to onData. */
    tcp: (id: string, port: number, options?: TcpOptions) => tcp(t, id, port, options),
    /** Whether tcp() would be let through now, checked as it would be, connecting to nothing: throws the API's refusal. */
    checkTcp: (id: string, port: number) => checkTcp(t, id, port),
    /** A path of the container, running or not (a stopped, exited or failed deployment keeps its files), as a tar archive: what cm cp reads out. */
    files: (id: string, path: string, options?: FilesOptions) => files(t, id, path, options),
  };

  /** Your logins to private registries: a deployment names one (registryCredentialId) to pull its image with. The password is never answered back. */
  const registryCredentials = {
    create: async (body: T.CreateRegistryCredentialRequest): Promise<T.RegistryCredential> =>
      (await call(t, "post", "/registry-credentials", { ...auth_, body })).credential,
    list: async (): Promise<T.RegistryCredential[]> => (await call(t, "get", "/registry-credentials", auth_)).credentials,
    remove: (id: string): Promise<T.SuccessResponse> => call(t, "delete", "/registry-credentials/{id}", { ...auth_, params: { id } }),
  };

  const credits = {
    balance: (): Promise<T.BalanceResponse> => call(t, "get", "/credits/balance", auth_),
    packages: (): Promise<T.PackagesResponse> => call(t, "get", "/credits/packages", auth_),
    initiateDeposit: (packageId: string, walletAddress: string): Promise<T.InitiateDepositResponse> =>
      call(t, "post", "/credits/deposit/initiate", { ...auth_, body: { packageId, walletAddress } }),
    confirmDeposit: (depositId: string, txSignature: string): Promise<T.ConfirmDepositResponse> =>
      call(t, "post", "/credits/deposit/confirm", { ...auth_, body: { depositId, txSignature } }),
    /** One of your deposits: pending (with its transfer request), confirmed (with its transaction) or expired. */
    deposit: (depositId: string): Promise<T.DepositStateResponse> => call(t, "get", "/credits/deposits/{id}", { ...auth_, params: { id: depositId } }),
    /** Polls the deposit until it is confirmed (answered) or expired (DepositWaitError): a payment by its transferRequestUrl needs no confirm call. */
    waitForDeposit: (depositId: string, options?: DepositWaitOptions) => waitForDeposit(t, depositId, options),
    transactions: (query: T.TransactionListQuery = {}): Promise<T.TransactionListResponse> => call(t, "get", "/credits/transactions", { ...auth_, query }),
    /** Pays a package in USDC from `payer` through the Solana RPC and confirms it: the new balance. */
    buy: (packageId: string, payer: Payer, options: BuyOptions) => buyCredits(t, packageId, payer, options),
  };

  const operator = {
    registerNode: (body: T.CreateNodeRequest): Promise<T.CreateNodeResponse> => call(t, "post", "/operator/nodes", { ...auth_, body }),
    /** all: retired nodes too, with their retiredAt */
    nodes: (query: T.OperatorNodeListQuery = {}): Promise<T.OperatorNodeListResponse> => call(t, "get", "/operator/nodes", { ...auth_, query }),
    retireNode: (id: string): Promise<T.DeleteDeploymentResponse> => call(t, "delete", "/operator/nodes/{id}", { ...auth_, params: { id } }),
    /** Changes the fields given; a new rate applies to deployments created after it, a lower maxDeployments stops nothing. */
    updateNode: async (id: string, body: T.UpdateNodeRequest): Promise<T.OperatorNode> =>
      (await call(t, "patch", "/operator/nodes/{id}", { ...auth_, params: { id }, body })).node,
    /** enabled: no new deployments there (tenants see `reason`), running ones go on; false: back to online or offline by its heartbeats. */
    setMaintenance: async (id: string, body: T.MaintenanceRequest): Promise<T.OperatorNode> =>
      (await call(t, "post", "/operator/nodes/{id}/maintenance", { ...auth_, params: { id }, body })).node,
    /** What is on the node, newest first: status, image, ports, the rate each was created with and what each earned you. Never the tenant's env. */
    nodeDeployments: (id: string, query: T.OperatorNodeDeploymentListQuery = {}): Promise<T.OperatorNodeDeploymentListResponse> =>
      call(t, "get", "/operator/nodes/{id}/deployments", { ...auth_, params: { id }, query }),
    /** What your nodes earned: pending, available, paid out, per node and per day (the last `days`, 30 by default). */
    earnings: (query: T.EarningsQuery = {}): Promise<T.EarningsResponse> => call(t, "get", "/operator/earnings", { ...auth_, query }),
    /** Your earnings ledger, newest first: your part of each usage charge, and refunds. */
    earningTransactions: (query: T.EarningTransactionListQuery = {}): Promise<T.EarningTransactionListResponse> =>
      call(t, "get", "/operator/earnings/transactions", { ...auth_, query }),
    /** Withdraws whole credits of your available earnings in USDC to the wallet you sign in with: the payout, requested. */
    payout: async (amountCredits: number): Promise<T.Payout> => (await call(t, "post", "/operator/payouts", { ...auth_, body: { amountCredits } })).payout,
    /** Your payouts, newest first. */
    payouts: (query: T.PayoutListQuery = {}): Promise<T.PayoutListResponse> => call(t, "get", "/operator/payouts", { ...auth_, query }),
    getPayout: async (id: string): Promise<T.Payout> => (await call(t, "get", "/operator/payouts/{id}", { ...auth_, params: { id } })).payout,
    /** Polls the payout until it is paid (with its txSignature) or failed (with its error); PayoutWaitError WAIT_TIMEOUT if neither comes in time. */
    waitForPayout: (id: string, options?: PayoutWaitOptions) => waitForPayout(t, id, options),
  };

  return {
    baseUrl: t.baseUrl,
    auth,
    nodes,
    templates,
    deployments,
    registryCredentials,
    credits,
    operator,
    health: () => call(t, "get", "/health", {}),
    ready: () => call(t, "get", "/ready", {}),
  };
}

export type Client = ReturnType<typeof createClient>;
