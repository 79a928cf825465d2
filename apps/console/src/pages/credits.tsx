import type { Balance, ConfirmDepositResponse, CreditPackage, Deposit, DepositState, TransactionListQuery } from "@cm/sdk";
import { CmError } from "@cm/sdk";
import { useCallback, useEffect, useRef, useState } from "react";
import { useApi, useSession } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { CreditsError } from "../components/credits-error";
import { canPay, chainSettings, walletPayer } from "../components/credits-payer";
import { QrCode } from "../components/credits-qr";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import type { PageDefinition } from "../router/pages";
import { useWallet } from "../wallet/wallet-context";
import { type SignInWallet, useSignInWallets } from "../wallet/wallets";
import "./credits.css";

/** Credits are US cents. */
const dollars = (credits: number) => `$${(credits / 100).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
const creditCount = (credits: number) => `${credits.toLocaleString("en-US")} credits`;
const when = (iso: string) => new Date(iso).toLocaleString();
const short = (text: string) => (text.length > 16 ? `${text.slice(0, 8)}…${text.slice(-6)}` : text);

/** A purchase under way, by wallet or by scanning; one at a time, shown above the packages. */
type Purchase =
  | {
      kind: "wallet";
      pkg: CreditPackage;
      wallet: string;
      step: "starting" | "signing" | "sent" | "confirming" | "following" | "credited" | "failed";
      deposit?: Deposit | DepositState;
      signature?: string;
      newBalance?: Balance;
      error?: unknown;
    }
  | {
      kind: "qr";
      pkg?: CreditPackage;
      step: "starting" | "waiting" | "credited" | "failed";
      deposit?: Deposit | DepositState;
      signature?: string;
      error?: unknown;
    };

/** Where a QR deposit is remembered, per wallet: a reload (or a phone that pays later) still finds it credited. */
const openDepositKey = (address: string) => `cm.credits.openDeposit.${address}`;

function Credits() {
  const client = useApi();
  const address = useSession()?.user?.walletAddress ?? "";
  const [changes, setChanges] = useState(0);
  const changed = useCallback(() => setChanges((n) => n + 1), []);
  const balance = useApiCall(() => client.credits.balance(), `balance ${changes}`, { pollMs: 15_000 });
  const packages = useApiCall(() => client.credits.packages(), "packages");
  const [purchase, setPurchase] = useState<Purchase | undefined>();
  const following = useRef<AbortController | undefined>(undefined);
  useEffect(() => () => following.current?.abort(), []);

  /** Follows a deposit until it is credited or expires, however it is paid; what it finds goes into the purchase shown. */
  const follow = useCallback(
    async (depositId: string, kind: Purchase["kind"]) => {
      following.current?.abort();
      const abort = new AbortController();
      following.current = abort;
      try {
        const paid = await client.credits.waitForDeposit(depositId, {
          signal: abort.signal,
          intervalMs: 2_000,
          onChange: (d) => setPurchase((p) => (p && p.kind === kind && p.deposit?.depositId === d.depositId ? { ...p, deposit: d } : p)),
        });
        setPurchase((p) => (p && p.deposit?.depositId === depositId ? { ...p, step: "credited", deposit: paid, signature: paid.txSignature } : p));
        localStorage.removeItem(openDepositKey(address));
        changed();
      } catch (error) {
        if (abort.signal.aborted) return;
        setPurchase((p) => (p && p.deposit?.depositId === depositId ? { ...p, step: "failed", error } : p));
        localStorage.removeItem(openDepositKey(address));
      }
    },
    [client, address, changed],
  );

  // A deposit shown as a QR code before a reload: followed again while it is open.
  useEffect(() => {
    const id = address && localStorage.getItem(openDepositKey(address));
    if (!id) return;
    client.credits.deposit(id).then(
      ({ deposit }) => {
        if (deposit.status !== "pending") return localStorage.removeItem(openDepositKey(address));
        setPurchase({ kind: "qr", step: "waiting", deposit });
        void follow(deposit.depositId, "qr");
      },
      () => localStorage.removeItem(openDepositKey(address)),
    );
  }, [client, address, follow]);

  const buyWithWallet = async (pkg: CreditPackage, wallet: SignInWallet, rpcUrl: string, decimals: number | undefined) => {
    following.current?.abort();
    setPurchase({ kind: "wallet", pkg, wallet: wallet.name, step: "starting" });
    let deposit: Deposit | undefined;
    let sent = false;
    try {
      const payer = await walletPayer(wallet, address, rpcUrl);
      const answer: ConfirmDepositResponse = await client.credits.buy(pkg.id, payer, {
        rpcUrl,
        decimals,
        timeoutMs: 120_000,
        onStep: (step, detail, d) => {
          deposit = d;
          if (step === "sent") sent = true;
          setPurchase((p) =>
            p?.kind === "wallet"
              ? {
                  ...p,
                  deposit: d,
                  step: step === "initiated" ? "signing" : step === "sent" ? "sent" : "confirming",
                  signature: step === "initiated" ? p.signature : detail,
                }
              : p,
          );
        },
      });
      setPurchase((p) => (p?.kind === "wallet" ? { ...p, step: "credited", newBalance: answer.newBalance, signature: answer.transaction.txSignature } : p));
      changed();
    } catch (error) {
      // Paid, but not (yet) confirmed here: the control plane's watcher finds the payment by its reference.
      if (deposit && sent) {
        setPurchase((p) => (p?.kind === "wallet" ? { ...p, step: "following", error } : p));
        await follow(deposit.depositId, "wallet");
      } else {
        setPurchase((p) => (p?.kind === "wallet" ? { ...p, step: "failed", error } : p));
      }
    }
  };

  const payByScanning = async (pkg: CreditPackage) => {
    following.current?.abort();
    setPurchase({ kind: "qr", pkg, step: "starting" });
    try {
      const { deposit } = await client.credits.initiateDeposit(pkg.id, address);
      localStorage.setItem(openDepositKey(address), deposit.depositId);
      setPurchase({ kind: "qr", pkg, step: "waiting", deposit });
      await follow(deposit.depositId, "qr");
    } catch (error) {
      setPurchase({ kind: "qr", pkg, step: "failed", error });
    }
  };

  const busy = purchase !== undefined && !["credited", "failed"].includes(purchase.step) && !(purchase.kind === "qr" && purchase.step === "waiting");

  return (
    <div className="credits-page">
      <h1>Credits</h1>
      <section aria-labelledby="balance-title" className="credits-balance">
        <h2 id="balance-title">Balance</h2>
        {balance.data ? (
          <dl className="credits-figures">
            <div>
              <dt>Available</dt>
              <dd data-testid="balance-available">
                {dollars(balance.data.balance.available)} <span className="credits-muted">({creditCount(balance.data.balance.available)})</span>
              </dd>
            </div>
            <div>
              <dt>Held for running deployments</dt>
              <dd>{dollars(balance.data.balance.reserved)}</dd>
            </div>
            <div>
              <dt>Spent, all time</dt>
              <dd>{dollars(balance.data.balance.totalUsed)}</dd>
            </div>
          </dl>
        ) : balance.error ? null : (
          <Loading label="Reading your balance…" />
        )}
        <ErrorNotice error={balance.error} onRetry={balance.reload} />
      </section>

      {purchase && <PurchasePanel purchase={purchase} onClose={() => setPurchase(undefined)} onRetryQr={(pkg) => void payByScanning(pkg)} />}

      <section aria-labelledby="packages-title">
        <h2 id="packages-title">Buy credits</h2>
        <p>1 credit is 1 US cent. You pay in USDC on Solana, from the wallet you signed in with; the credits arrive once the payment is confirmed.</p>
        {packages.data ? (
          <PackageList packages={packages.data.packages} busy={busy} onWallet={buyWithWallet} onScan={(p) => void payByScanning(p)} />
        ) : packages.error ? null : (
          <Loading label="Reading the packages…" />
        )}
        <ErrorNotice error={packages.error} onRetry={packages.reload} />
      </section>

      <History changes={changes} />
    </div>
  );
}

function PackageList({
  packages,
  busy,
  onWallet,
  onScan,
}: {
  packages: CreditPackage[];
  busy: boolean;
  onWallet: (pkg: CreditPackage, wallet: SignInWallet, rpcUrl: string, decimals: number | undefined) => Promise<void>;
  onScan: (pkg: CreditPackage) => void;
}) {
  const connected = useWallet().wallet;
  const payable = useSignInWallets().filter(canPay);
  const [chosen, setChosen] = useState<string | undefined>();
  const wallet = payable.find((w) => w.name === chosen) ?? (connected && canPay(connected) ? connected : payable[0]);
  const { rpcUrl, decimals } = chainSettings();
  if (packages.length === 0) return <p>No credit packages are on offer here yet: ask the operator of this installation.</p>;
  return (
    <>
      {!rpcUrl ? (
        <p className="credits-note">This installation names no Solana RPC for the browser: pay by scanning the QR code with a wallet app.</p>
      ) : payable.length === 0 ? (
        <p className="credits-note">No wallet in this browser can sign Solana transactions: pay by scanning the QR code with a wallet app on your phone.</p>
      ) : payable.length > 1 ? (
        <div className="field credits-wallet-choice">
          <label htmlFor="pay-with">Pay with</label>
          <select id="pay-with" value={wallet?.name} onChange={(e) => setChosen(e.target.value)}>
            {payable.map((w) => (
              <option key={w.name}>{w.name}</option>
            ))}
          </select>
        </div>
      ) : null}
      <ul className="credits-packages">
        {packages.map((p) => (
          <li key={p.id} className="credits-package" aria-labelledby={`package-${p.id}`}>
            <h3 id={`package-${p.id}`}>{p.name}</h3>
            <p className="credits-package-credits">{creditCount(p.creditsToReceive)}</p>
            {p.bonusPercent > 0 && (
              <p className="credits-bonus">
                {creditCount(p.credits)} + {p.bonusPercent}% bonus
              </p>
            )}
            <p>
              {p.priceStable.toLocaleString("en-US", { maximumFractionDigits: 6 })} USDC <span className="credits-muted">(${p.priceUsd.toFixed(2)})</span>
            </p>
            <div className="credits-actions">
              {rpcUrl && wallet && (
                <button type="button" disabled={busy} onClick={() => void onWallet(p, wallet, rpcUrl, decimals)} aria-describedby={`package-${p.id}`}>
                  Buy with {wallet.name}
                </button>
              )}
              <button type="button" className="credits-secondary" disabled={busy} onClick={() => onScan(p)} aria-describedby={`package-${p.id}`}>
                Pay by QR code
              </button>
            </div>
          </li>
        ))}
      </ul>
    </>
  );
}

const WALLET_STEPS = [
  ["starting", "Starting a deposit"],
  ["signing", "Approve the payment in your wallet"],
  ["sent", "Sent: waiting for the chain to confirm it"],
  ["confirming", "Confirmed on chain: crediting"],
] as const;

function PurchasePanel({ purchase, onClose, onRetryQr }: { purchase: Purchase; onClose: () => void; onRetryQr: (pkg: CreditPackage) => void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  // The panel takes the focus when it opens, so a keyboard or screen-reader user is where the news is.
  useEffect(() => heading.current?.focus(), []);
  const d = purchase.deposit;
  const amount = d ? `${d.amountStable} USDC for ${creditCount(d.creditsToReceive)}` : purchase.pkg ? creditCount(purchase.pkg.creditsToReceive) : "";
  return (
    <section className="credits-purchase" aria-labelledby="purchase-title">
      <h2 id="purchase-title" ref={heading} tabIndex={-1}>
        {purchase.kind === "wallet" ? `Buying with ${purchase.wallet}` : "Pay by scanning"}
        {amount && <span className="credits-muted"> · {amount}</span>}
      </h2>
      <div aria-live="polite">
        {purchase.kind === "wallet" && purchase.step !== "credited" && purchase.step !== "failed" && <WalletProgress purchase={purchase} />}
        {purchase.kind === "qr" && purchase.step === "starting" && <Loading label="Starting a deposit…" />}
        {purchase.kind === "qr" && purchase.step === "waiting" && d && "transferRequestUrl" in d && d.transferRequestUrl && (
          <ScanToPay deposit={d as Deposit} />
        )}
        {purchase.step === "credited" && d && (
          <p className="credits-credited" role="status">
            Credited: +{creditCount(d.creditsToReceive)}
            {purchase.kind === "wallet" && purchase.newBalance && <>. Your balance is now {dollars(purchase.newBalance.available)}</>}.
            {purchase.signature && (
              <>
                {" "}
                <span className="credits-muted">Payment {short(purchase.signature)}</span>
              </>
            )}
          </p>
        )}
        {purchase.step === "failed" && <CreditsError error={purchase.error} />}
        {purchase.kind === "wallet" && purchase.step === "failed" && !(purchase.error instanceof CmError) && (
          // The wallet said no, or failed on its side: nothing was sent.
          <p className="credits-next">Nothing was paid. Try again and approve the payment in {purchase.wallet}, or pay by QR code.</p>
        )}
        {purchase.kind === "wallet" && purchase.step === "following" && <CreditsError error={purchase.error} />}
      </div>
      <div className="credits-actions">
        {purchase.kind === "qr" && purchase.step === "failed" && purchase.pkg && (
          <button type="button" onClick={() => onRetryQr(purchase.pkg!)}>
            Start a new deposit
          </button>
        )}
        <button type="button" className="credits-secondary" onClick={onClose}>
          {purchase.step === "credited" || purchase.step === "failed" ? "Close" : "Stop following"}
        </button>
      </div>
      {purchase.kind === "qr" && purchase.step === "waiting" && (
        <p className="credits-muted">Stopping only stops this page from watching: a payment made before the deposit expires is still credited.</p>
      )}
    </section>
  );
}

function WalletProgress({ purchase }: { purchase: Extract<Purchase, { kind: "wallet" }> }) {
  if (purchase.step === "following") return <Loading label="The payment was sent: following the deposit until it is credited…" />;
  const at = WALLET_STEPS.findIndex(([s]) => s === purchase.step);
  return (
    <ol className="credits-steps">
      {WALLET_STEPS.map(([step, label], i) => (
        <li
          key={step}
          className={i < at ? "credits-step-done" : i === at ? "credits-step-now" : "credits-step-later"}
          aria-current={i === at ? "step" : undefined}
        >
          {i === at ? <Loading label={`${label}…`} /> : `${label}${i < at ? " ✓" : ""}`}
          {step === "sent" && i <= at && purchase.signature && <span className="credits-muted"> ({short(purchase.signature)})</span>}
        </li>
      ))}
    </ol>
  );
}

function ScanToPay({ deposit }: { deposit: Deposit }) {
  const [copied, setCopied] = useState<string | undefined>();
  const copy = () =>
    navigator.clipboard.writeText(deposit.transferRequestUrl).then(
      () => setCopied("Link copied."),
      () => setCopied("Copying failed: select the link and copy it."),
    );
  return (
    <div className="credits-scan">
      <QrCode text={deposit.transferRequestUrl} label={`Solana Pay QR code: ${deposit.amountStable} USDC to ${deposit.treasuryWallet}`} />
      <div>
        <p>
          Scan this with a Solana wallet app holding the wallet you signed in with, and approve {deposit.amountStable} USDC. This page shows the credit as soon
          as the payment is found; you need not come back to it.
        </p>
        <p>
          <a href={deposit.transferRequestUrl}>Open in a wallet app</a>{" "}
          <button type="button" className="credits-secondary" onClick={() => void copy()}>
            Copy payment link
          </button>{" "}
          <span role="status">{copied}</span>
        </p>
        <dl className="credits-deposit-facts">
          <dt>Deposit</dt>
          <dd data-testid="deposit-id">{deposit.depositId}</dd>
          <dt>Pay before</dt>
          <dd>{when(deposit.expiresAt)}</dd>
          <dt>Reference</dt>
          <dd className="credits-mono">{short(deposit.reference)}</dd>
        </dl>
        <Loading label="Waiting for the payment…" />
      </div>
    </div>
  );
}

const TYPES = ["", "deposit", "usage", "refund"] as const;

function History({ changes }: { changes: number }) {
  const client = useApi();
  const [type, setType] = useState<(typeof TYPES)[number]>("");
  const [page, setPage] = useState(1);
  const query: TransactionListQuery = { page, limit: 20, ...(type ? { type } : {}) };
  const list = useApiCall(() => client.credits.transactions(query), `${JSON.stringify(query)} ${changes}`, { pollMs: 30_000 });
  const p = list.data?.pagination;
  return (
    <section aria-labelledby="history-title">
      <h2 id="history-title">History</h2>
      <div className="field credits-filter">
        <label htmlFor="history-type">Show</label>
        <select
          id="history-type"
          value={type}
          onChange={(e) => {
            setType(e.target.value as (typeof TYPES)[number]);
            setPage(1);
          }}
        >
          <option value="">Everything</option>
          <option value="deposit">Deposits</option>
          <option value="usage">Usage charges</option>
          <option value="refund">Refunds</option>
        </select>
      </div>
      <ErrorNotice error={list.error} onRetry={list.reload} />
      {!list.data && !list.error && <Loading label="Reading your history…" />}
      {list.data &&
        (list.data.transactions.length === 0 ? (
          <p>{type ? "Nothing of this kind yet." : "No deposits or charges yet: buy a package above to start."}</p>
        ) : (
          <div className="credits-table-wrap">
            <table className="credits-table">
              <caption className="credits-visually-hidden">Deposits, usage charges and refunds, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Type</th>
                  <th scope="col">Amount</th>
                  <th scope="col">Description</th>
                  <th scope="col">Reference</th>
                </tr>
              </thead>
              <tbody>
                {list.data.transactions.map((t) => (
                  <tr key={t.id}>
                    <td>{when(t.createdAt)}</td>
                    <td>{t.type}</td>
                    <td className={t.amount < 0 ? "credits-minus" : "credits-plus"}>
                      {t.amount > 0 ? "+" : ""}
                      {dollars(t.amount)}
                    </td>
                    <td>{t.description}</td>
                    <td className="credits-mono" title={t.txSignature ?? t.deploymentId}>
                      {t.txSignature ? short(t.txSignature) : t.deploymentId ? short(t.deploymentId) : ""}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ))}
      {p && p.totalPages > 1 && (
        <nav className="credits-pager" aria-label="History pages">
          <button type="button" className="credits-secondary" disabled={page <= 1} onClick={() => setPage(page - 1)}>
            Newer
          </button>
          <span>
            Page {p.page} of {p.totalPages}
          </span>
          <button type="button" className="credits-secondary" disabled={page >= p.totalPages} onClick={() => setPage(page + 1)}>
            Older
          </button>
        </nav>
      )}
    </section>
  );
}

export const page: PageDefinition = { path: "/credits", title: "Credits", nav: 50, signedIn: true, component: Credits };
