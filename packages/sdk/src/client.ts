import { type BuyOptions, buyCredits, type Payer } from "./chain";
import { type DepositWaitOptions, waitForDeposit } from "./deposits";
import { ApiError } from "./errors";
import { type ExecOptions, exec } from "./exec";
import { type FollowOptions, follow, type PollOptions, type WaitOptions, waitFor, watch } from "./follow";
import { type PayoutWaitOptions, waitForPayout } from "./payouts";
import { type Signer, signText, walletAddress } from "./signer";
import { checkTcp, type TcpOptions, tcp } from "./tcp";
import { type ClientOptions, Transport } from "./transport";
import type * as T from "./types";

const seg = encodeURIComponent;

/**
 * One client for every route of the API. Protected calls use the session in
 * `store` (sign in first), refreshing it before it expires and once more when
 * the API says TOKEN_EXPIRED.
 */
export function createClient(options: ClientOptions) {
  const t = new Transport(options);
  const get = <R>(
    path: string,
    query?:
      | T.NodeListQuery
      | T.TemplateListQuery
      | T.DeploymentListQuery
      | T.LogsQuery
      | T.TransactionListQuery
      | T.OperatorNodeListQuery
      | T.OperatorNodeDeploymentListQuery
      | T.EarningsQuery
      | T.EarningTransactionListQuery
      | T.PayoutListQuery,
  ) => t.json<R>("GET", path, { auth: true, query });
  const post = <R>(path: string, body?: unknown) => t.json<R>("POST", path, { auth: true, body });
  const del = <R>(path: string) => t.json<R>("DELETE", path, { auth: true });

  const auth = {
    nonce: (walletAddress: string) => t.json<T.NonceResponse>("POST", "/auth/nonce", { body: { walletAddress } }),
    verify: (body: T.VerifyRequest) => t.json<T.VerifyResponse>("POST", "/auth/verify", { body }),
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
    me: () => get<T.MeResponse>("/auth/me"),
    /**
     * Revokes the session on the API (its refresh token's whole family) and forgets it
     * here; forgotten even when the API cannot be told (the error is thrown after).
     */
    async signOut(): Promise<void> {
      const session = await t.store.load();
      if (!session) return;
      try {
        await t.json<T.LogoutResponse>("POST", "/auth/logout", { body: { refreshToken: session.refreshToken } });
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
  };

  const nodes = {
    list: (query: T.NodeListQuery = {}) => t.json<T.NodeListResponse>("GET", "/nodes", { query }),
    get: (id: string) => t.json<T.NodeResponse>("GET", `/nodes/${seg(id)}`),
  };

  const templates = {
    list: (query: T.TemplateListQuery = {}) => t.json<T.TemplateListResponse>("GET", "/templates", { query }),
    get: (idOrSlug: string) => t.json<T.TemplateResponse>("GET", `/templates/${seg(idOrSlug)}`),
  };

  const deployments = {
    create: (body: T.CreateDeploymentRequest) => post<T.CreateDeploymentResponse>("/deployments", body),
    /** What create would do with this body now (node, rate, hold, whether it fits), creating and holding nothing. */
    estimate: (body: T.CreateDeploymentRequest) => post<T.DeploymentEstimateResponse>("/deployments/estimate", body),
    list: (query: T.DeploymentListQuery = {}) => get<T.DeploymentListResponse>("/deployments", query),
    get: (id: string) => get<T.DeploymentResponse>(`/deployments/${seg(id)}`),
    start: (id: string) => post<T.DeploymentResponse>(`/deployments/${seg(id)}/start`),
    stop: (id: string) => post<T.DeploymentResponse>(`/deployments/${seg(id)}/stop`),
    remove: (id: string) => del<T.DeleteDeploymentResponse>(`/deployments/${seg(id)}`),
    logs: (id: string, query: T.LogsQuery = {}) => get<T.LogsResponse>(`/deployments/${seg(id)}/logs`, query),
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
  };

  /** Your logins to private registries: a deployment names one (registryCredentialId) to pull its image with. The password is never answered back. */
  const registryCredentials = {
    create: async (body: T.CreateRegistryCredentialRequest): Promise<T.RegistryCredential> =>
      (await post<T.RegistryCredentialResponse>("/registry-credentials", body)).credential,
    list: async (): Promise<T.RegistryCredential[]> => (await get<T.RegistryCredentialListResponse>("/registry-credentials")).credentials,
    remove: (id: string) => del<T.SuccessResponse>(`/registry-credentials/${seg(id)}`),
  };

  const credits = {
    balance: () => get<T.BalanceResponse>("/credits/balance"),
    packages: () => get<T.PackagesResponse>("/credits/packages"),
    initiateDeposit: (packageId: string, walletAddress: string) => post<T.InitiateDepositResponse>("/credits/deposit/initiate", { packageId, walletAddress }),
    confirmDeposit: (depositId: string, txSignature: string) => post<T.ConfirmDepositResponse>("/credits/deposit/confirm", { depositId, txSignature }),
    /** One of your deposits: pending (with its transfer request), confirmed (with its transaction) or expired. */
    deposit: (depositId: string) => get<T.DepositStateResponse>(`/credits/deposits/${seg(depositId)}`),
    /** Polls the deposit until it is confirmed (answered) or expired (DepositWaitError): a payment by its transferRequestUrl needs no confirm call. */
    waitForDeposit: (depositId: string, options?: DepositWaitOptions) => waitForDeposit(t, depositId, options),
    transactions: (query: T.TransactionListQuery = {}) => get<T.TransactionListResponse>("/credits/transactions", query),
    /** Pays a package in USDC from `payer` through the Solana RPC and confirms it: the new balance. */
    buy: (packageId: string, payer: Payer, options: BuyOptions) => buyCredits(t, packageId, payer, options),
  };

  const operator = {
    registerNode: (body: T.CreateNodeRequest) => post<T.CreateNodeResponse>("/operator/nodes", body),
    /** all: retired nodes too, with their retiredAt */
    nodes: (query: T.OperatorNodeListQuery = {}) => get<T.OperatorNodeListResponse>("/operator/nodes", query),
    retireNode: (id: string) => del<T.DeleteDeploymentResponse>(`/operator/nodes/${seg(id)}`),
    /** Changes the fields given; a new rate applies to deployments created after it, a lower maxDeployments stops nothing. */
    updateNode: async (id: string, body: T.UpdateNodeRequest): Promise<T.OperatorNode> =>
      (await t.json<T.OperatorNodeResponse>("PATCH", `/operator/nodes/${seg(id)}`, { auth: true, body })).node,
    /** enabled: no new deployments there (tenants see `reason`), running ones go on; false: back to online or offline by its heartbeats. */
    setMaintenance: async (id: string, body: T.MaintenanceRequest): Promise<T.OperatorNode> =>
      (await post<T.OperatorNodeResponse>(`/operator/nodes/${seg(id)}/maintenance`, body)).node,
    /** What is on the node, newest first: status, image, ports, the rate each was created with and what each earned you. Never the tenant's env. */
    nodeDeployments: (id: string, query: T.OperatorNodeDeploymentListQuery = {}) =>
      get<T.OperatorNodeDeploymentListResponse>(`/operator/nodes/${seg(id)}/deployments`, query),
    /** What your nodes earned: pending, available, paid out, per node and per day (the last `days`, 30 by default). */
    earnings: (query: T.EarningsQuery = {}) => get<T.EarningsResponse>("/operator/earnings", query),
    /** Your earnings ledger, newest first: your part of each usage charge, and refunds. */
    earningTransactions: (query: T.EarningTransactionListQuery = {}) => get<T.EarningTransactionListResponse>("/operator/earnings/transactions", query),
    /** Withdraws whole credits of your available earnings in USDC to the wallet you sign in with: the payout, requested. */
    payout: async (amountCredits: number): Promise<T.Payout> =>
      (await post<T.PayoutResponse>("/operator/payouts", { amountCredits } satisfies T.PayoutRequest)).payout,
    /** Your payouts, newest first. */
    payouts: (query: T.PayoutListQuery = {}) => get<T.PayoutListResponse>("/operator/payouts", query),
    getPayout: async (id: string): Promise<T.Payout> => (await get<T.PayoutResponse>(`/operator/payouts/${seg(id)}`)).payout,
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
    health: () => t.json<{ status: "ok" }>("GET", "/health"),
    ready: () => t.json<{ status: "ready" }>("GET", "/ready"),
  };
}

export type Client = ReturnType<typeof createClient>;
