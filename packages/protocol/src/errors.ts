/**
 * Every error the public API can answer, with its HTTP status. One table so the
 * server, the OpenAPI document and any client agree on what a code means.
 */
export const ERROR_CODES = {
  // Authentication (the spec's own codes first).
  INVALID_WALLET_ADDRESS: { status: 400, description: "The wallet address is not a base58 32-byte ed25519 public key." },
  NONCE_EXPIRED: { status: 400, description: "The sign-in message is past its expiry; ask for a new nonce." },
  NONCE_NOT_FOUND: { status: 400, description: "The message was never issued to this wallet, or was already used." },
  INVALID_SIGNATURE: { status: 401, description: "The signature does not verify over the message with the wallet's key." },
  TOKEN_EXPIRED: { status: 401, description: "The access token is past its expiry; refresh it." },
  INVALID_REFRESH_TOKEN: { status: 401, description: "The refresh token is unknown, expired, revoked or already used." },
  UNAUTHORIZED: { status: 401, description: "The Authorization header is missing, malformed, or names an unknown token." },
  INSUFFICIENT_SCOPE: {
    status: 403,
    description:
      "The API key lacks the scope this route needs (details.requiredScope names it; details.keyScopes lists the key's); API keys themselves are managed only by a signed-in wallet session.",
  },
  API_KEY_EXPIRED: { status: 401, description: "The API key is past its expiresAt; create a new one." },
  API_KEY_NOT_FOUND: { status: 404, description: "No API key of yours has this id." },
  API_KEY_QUOTA_EXCEEDED: { status: 403, description: "This account already holds as many API keys as one account may (50); delete one first." },
  // Request shape.
  VALIDATION_ERROR: { status: 400, description: "The request does not match its schema; details lists each field." },
  INVALID_JSON: { status: 400, description: "The body is not valid JSON." },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, description: "The body must be sent as application/json." },
  PAYLOAD_TOO_LARGE: { status: 413, description: "The body is larger than the limit." },
  URI_TOO_LONG: { status: 414, description: "The URL is longer than the limit (16 KiB)." },
  HEADERS_TOO_LARGE: { status: 431, description: "The URL and headers together are larger than the limit (16 KiB)." },
  TEMPLATE_OR_IMAGE_REQUIRED: { status: 400, description: "Give exactly one of templateId and customImage; neither was given." },
  TEMPLATE_AND_IMAGE_CONFLICT: { status: 400, description: "Give exactly one of templateId and customImage; both were given." },
  RESTART_POLICY_CONFLICT: { status: 400, description: 'maxRestarts was given with restart "no": leave it out, or give restart "on-failure".' },
  // Resources.
  NOT_FOUND: { status: 404, description: "No route answers this method and path." },
  NODE_NOT_FOUND: { status: 404, description: "No node has this id." },
  NODE_QUOTA_EXCEEDED: {
    status: 403,
    description: "This account already operates as many nodes as one account may (MAX_NODES_PER_ACCOUNT); retire one first.",
  },
  TEMPLATE_NOT_FOUND: { status: 404, description: "No template has this id or slug." },
  DEPLOYMENT_NOT_FOUND: { status: 404, description: "No deployment of yours has this id." },
  TCP_PORT_NOT_DECLARED: {
    status: 404,
    description: "The deployment does not declare this port in its tcpPorts, the only ports GET /deployments/{id}/tcp/{port} reaches.",
  },
  PACKAGE_NOT_FOUND: { status: 404, description: "No credit package has this id." },
  DEPOSIT_NOT_FOUND: { status: 404, description: "No deposit of yours has this id." },
  PATH_NOT_FOUND: {
    status: 404,
    description: "Nothing exists at this path in the deployment's container (or a part of the path before its end is not a directory).",
  },
  // Deployments.
  TCP_PORT_NOT_LISTENING: {
    status: 502,
    description: "Nothing in the container accepts connections on this TCP port (yet): start the server, or retry once it listens.",
  },
  INVALID_STATE_TRANSITION: { status: 409, description: "The deployment's current status does not allow this action; details.currentStatus says which it is." },
  NODE_OFFLINE: { status: 409, description: "The node is not online." },
  CONTAINER_GONE: {
    status: 409,
    description:
      "The deployment's node keeps no container for it: none was made yet (pending, pulling) or could be (its image could not be pulled), or it was removed (LOST_RETENTION_S after its node was lost, or on the node out of band). Its files are gone; details.currentStatus says the deployment's status.",
  },
  FILES_READ_FAILED: { status: 502, description: "The node's container engine could not read the path out of the container; the message says why." },
  NODE_AT_CAPACITY: { status: 409, description: "The node already runs its maxDeployments." },
  NODE_IN_MAINTENANCE: {
    status: 409,
    description:
      "Its operator put the node in maintenance: it takes no new deployments (running ones go on); the message and details.maintenanceReason say why.",
  },
  NODE_NO_GPU: { status: 422, description: "The template needs a GPU and the node has none." },
  NODE_INSUFFICIENT_GPU_VRAM: { status: 422, description: "The node's largest GPU has less VRAM than the template needs." },
  NODE_INSUFFICIENT_CPU: { status: 422, description: "The node has fewer CPU cores than the template needs, or than cpuCores asks." },
  IMAGE_HAS_NO_COMMAND: {
    status: 422,
    description: "The node holds the image with neither a CMD nor an ENTRYPOINT (as its agent last reported) and runs its local copy as it is: give a command.",
  },
  NODE_INSUFFICIENT_RAM: { status: 422, description: "The node has less RAM than the template needs, or than memoryMb asks." },
  NODE_INSUFFICIENT_GPUS: { status: 422, description: "gpuCount is more than the node's GPUs." },
  NODE_INSUFFICIENT_DISK: {
    status: 422,
    description: "The deployment's disk allowance (diskGb, else its template's minDiskGb) is more than the node's disk (specs.diskGb).",
  },
  NODE_INSUFFICIENT_FREE_GPUS: {
    status: 409,
    description: "The node's GPUs not held by its live deployments are fewer than gpuCount; details.freeGpus says how many are free.",
  },
  NODE_INSUFFICIENT_FREE_CPU: {
    status: 409,
    description: "The node's CPU cores not held by its live deployments are fewer than the deployment's cpuCores; details.freeCpuCores says how many are free.",
  },
  NODE_INSUFFICIENT_FREE_RAM: {
    status: 409,
    description: "The node's memory not held by its live deployments is less than the deployment's memoryMb; details.freeMemoryMb says how much is free.",
  },
  NODE_INSUFFICIENT_FREE_DISK: {
    status: 409,
    description:
      "The node's disk not held by its live deployments is less than the deployment's disk allowance (diskGb); details.freeDiskGb says how much is free.",
  },
  NO_NODE_FITS: {
    status: 409,
    description:
      "No nodeId was given and no online node fits the deployment now (or nodeId was given and that node misses region, maxHourlyRate, gpuModel or minGpuVram); the message counts the online nodes per reason, details.online says how many were online and details.reasons counts them by reason (region, gpuModel, minGpuVram, maxHourlyRate, or the code creating on that node would answer).",
  },
  INSUFFICIENT_CREDITS: {
    status: 402,
    description:
      "Available credits do not cover the hour of the deployment's rate it holds while it runs; details.requiredCredits says how many that is, details.availableCredits how many are available. Add credits with POST /credits/deposit/initiate (cm credits buy).",
  },
  // Registry credentials.
  REGISTRY_CREDENTIAL_NOT_FOUND: { status: 404, description: "No registry credential of yours has this id." },
  REGISTRY_CREDENTIAL_MISMATCH: {
    status: 422,
    description: "The registry credential is for another registry than the one the image is pulled from; details.registry and details.imageRegistry say which.",
  },
  REGISTRY_CREDENTIAL_QUOTA_EXCEEDED: {
    status: 403,
    description: "This account already stores as many registry credentials as one account may (REGISTRY_CREDENTIALS_MAX); delete one first.",
  },
  REGISTRY_CREDENTIALS_NOT_CONFIGURED: {
    status: 503,
    description:
      "This installation keeps its database in PostgreSQL and has no REGISTRY_CREDENTIALS_KEY, so it cannot seal a registry password; its operator must set one (the same on every replica). Nothing was stored.",
  },
  // Credits.
  DEPOSIT_EXPIRED: { status: 410, description: "The deposit is past its expiresAt; start a new one." },
  DEPOSIT_WALLET_MISMATCH: { status: 400, description: "walletAddress is not the wallet you signed in with." },
  TX_NOT_FOUND: { status: 404, description: "The transaction is not (yet) visible on chain at the required commitment; retry shortly." },
  TX_FAILED: { status: 422, description: "The transaction failed on chain." },
  MINT_MISMATCH: { status: 422, description: "The payment was not made in the expected token." },
  RECIPIENT_MISMATCH: { status: 422, description: "The payment did not go to the treasury wallet." },
  AMOUNT_TOO_LOW: { status: 422, description: "The treasury received less than amountStable." },
  PAYER_MISMATCH: { status: 422, description: "The payment was not made by the deposit's walletAddress." },
  PAYMENT_AFTER_EXPIRY: { status: 422, description: "The payment landed after the deposit expired." },
  DEPOSIT_ALREADY_CONFIRMED: { status: 409, description: "The deposit was already confirmed with another transaction." },
  PAYMENTS_NOT_CONFIGURED: {
    status: 503,
    description: "This installation has no TREASURY_WALLET; an administrator can credit accounts with the admin command.",
  },
  SIGNATURE_ALREADY_USED: { status: 409, description: "This transaction signature already credited a deposit." },
  TOO_MANY_OPEN_DEPOSITS: {
    status: 429,
    description:
      "This account already has as many deposits pending as one account may (MAX_OPEN_DEPOSITS, 20 by default): pay one of them, or wait until one expires (Retry-After says when the oldest does).",
  },
  CHAIN_UNAVAILABLE: { status: 503, description: "The Solana RPC node did not answer; nothing changed, retry later." },
  // Payouts.
  PAYOUT_NOT_FOUND: { status: 404, description: "No payout of yours has this id." },
  PAYOUT_BELOW_MINIMUM: { status: 422, description: "amountCredits is below PAYOUT_MIN_CREDITS; details.minimumCredits says how much." },
  INSUFFICIENT_EARNINGS: {
    status: 422,
    description:
      "amountCredits is more than your available earnings (pending earnings and payouts in flight do not count); details.availableCredits says how much is.",
  },
  PAYOUT_ABOVE_DAILY_LIMIT: {
    status: 422,
    description:
      "PAYOUTS=auto: amountCredits is more than this installation pays out in a day (PAYOUT_DAILY_LIMIT_CREDITS); details.dailyLimitCredits says how much. Ask for less, in several payouts.",
  },
  PAYOUTS_NOT_CONFIGURED: { status: 503, description: "This installation has no PAYOUT_KEYPAIR, so it cannot pay out; nothing was requested." },
  // Operational.
  UPGRADE_REQUIRED: {
    status: 426,
    description: "This route speaks WebSocket only: open it with Upgrade: websocket and its subprotocol (cm.exec.v1 for exec, cm.tcp.v1 for tcp).",
  },
  SERVICE_UNAVAILABLE: { status: 503, description: "The database does not answer (GET /ready says so too); nothing changed. Retry after Retry-After seconds." },
  RATE_LIMITED: { status: 429, description: "Too many requests; wait Retry-After seconds." },
  INTERNAL_ERROR: { status: 500, description: "Something failed on our side; the request id helps us find it." },
} as const satisfies Record<string, { status: number; description: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function statusOf(code: ErrorCode): number {
  return ERROR_CODES[code].status;
}
