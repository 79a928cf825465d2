import { ApiError, CmError, NetworkError, SessionError } from "@cm/sdk";

/** What to do next for the errors a user can act on; the API's own message says what went wrong. */
const NEXT: Partial<Record<ApiError["code"], string>> = {
  UNAUTHORIZED: "Sign in again with your wallet.",
  TOKEN_EXPIRED: "Sign in again with your wallet.",
  INVALID_REFRESH_TOKEN: "Your session ended: sign in again with your wallet.",
  INVALID_SIGNATURE: "The wallet's signature did not verify: try signing in again, with the same account.",
  NONCE_EXPIRED: "The sign-in message expired: sign in again.",
  INSUFFICIENT_CREDITS: "Buy credits on the Credits page, then try again.",
  NO_NODE_FITS: "Loosen the requirements, or pick a node from the catalogue.",
  NODE_OFFLINE: "Pick another node, or wait for this one to come back online.",
  NODE_IN_MAINTENANCE: "Pick another node: its operator paused this one.",
  RATE_LIMITED: "Wait a minute, then try again.",
  NODE_QUOTA_EXCEEDED: "Retire a node you no longer run, then add this one.",
  PAYOUT_BELOW_MINIMUM: "Ask for at least the minimum the message names.",
  PAYOUT_ABOVE_DAILY_LIMIT: "Ask for the daily limit or less; request the rest tomorrow.",
  INSUFFICIENT_EARNINGS: "Ask for no more than your available earnings; pending earnings become available after the hold.",
  PAYOUTS_NOT_CONFIGURED: "This installation cannot pay out yet: ask its administrator to set PAYOUT_KEYPAIR.",
};

/**
 * An error as the user should see it: the API's message and code (and request id, for support), and what to do next.
 * `next`: a page's own advice for this error (credits-error.tsx's for payments), before the shared one.
 */
export function ErrorNotice({ error, onRetry, next: advice }: { error: unknown; onRetry?: () => void; next?: string | undefined }) {
  if (!error) return null;
  let message = "Something went wrong.";
  let code: string | undefined;
  let requestId: string | undefined;
  let next: string | undefined;
  if (error instanceof ApiError) {
    message = error.message;
    code = error.code;
    requestId = error.requestId;
    next = NEXT[error.code];
  } else if (error instanceof NetworkError) {
    message = `The API could not be reached: ${error.message}`;
    next = "Check your connection, then try again.";
  } else if (error instanceof SessionError) {
    message = error.message;
    next = "Sign in again with your wallet.";
  } else if (error instanceof CmError) {
    // The SDK's own refusals (a payment, a wait that ended): its code says which.
    message = error.message;
    code = error.code;
  } else if (error instanceof Error) {
    message = error.message;
  }
  next = advice ?? next;
  return (
    <div role="alert" className="error">
      <p className="error-message">
        {message}
        {code && (
          <>
            {" "}
            <code className="error-code">{code}</code>
          </>
        )}
      </p>
      {next && <p className="error-next">{next}</p>}
      {requestId && <p className="error-request">Request id: {requestId}</p>}
      {onRetry && (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}
