import type { Payout } from "@cm/sdk";
import { type FormEvent, useState } from "react";
import { useApi } from "../api/api-context";
import { useApiCall } from "../api/use-api-call";
import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { Labelled } from "./labelled";
import { creditsText, creditsWithUsdc, whenText } from "./operator-format";

/** Earnings (pending, available, paying out, paid out), a payout request, and the payouts with their status. */
export function OperatorEarnings() {
  const api = useApi();
  const earnings = useApiCall(() => api.operator.earnings({ days: 7 }), "earnings", { pollMs: 10_000 });
  const payouts = useApiCall(() => api.operator.payouts({ limit: 20 }), "payouts", { pollMs: 10_000 });
  const [amount, setAmount] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [requested, setRequested] = useState<Payout>();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    setRequested(undefined);
    try {
      setRequested(await api.operator.payout(Number(amount)));
      setAmount("");
      earnings.reload();
      payouts.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const e = earnings.data?.earnings;
  return (
    <section aria-labelledby="earnings-title" className="operator-earnings">
      <h2 id="earnings-title">Earnings and payouts</h2>
      <ErrorNotice error={earnings.error} onRetry={earnings.reload} />
      {!e && earnings.loading && <Loading label="Loading earnings…" />}
      {e && (
        <dl className="earnings">
          <div>
            <dt>Pending</dt>
            <dd>{creditsText(e.pending)}</dd>
            <dd className="hint">held {e.holdHours} h after it is earned</dd>
          </div>
          <div>
            <dt>Available</dt>
            <dd>{creditsWithUsdc(e.available)}</dd>
            <dd className="hint">yours to pay out</dd>
          </div>
          <div>
            <dt>Paying out</dt>
            <dd>{creditsText(e.payingOut)}</dd>
          </div>
          <div>
            <dt>Paid out</dt>
            <dd>{creditsText(e.paidOut)}</dd>
          </div>
        </dl>
      )}
      {e && <p className="hint">The platform keeps {e.feePercent}% of each charge on your nodes; the rest is yours.</p>}

      <form className="operator-form payout-form" aria-labelledby="payout-title" onSubmit={submit}>
        <h3 id="payout-title">Request a payout</h3>
        <Labelled label="Amount (credits)" hint="Paid in USDC to the wallet you signed in with: 100 credits = 1 USDC.">
          {(id, hint) => (
            <input
              id={id}
              aria-describedby={hint}
              type="number"
              inputMode="numeric"
              required
              min={1}
              step={1}
              value={amount}
              onChange={(ev) => setAmount(ev.target.value)}
            />
          )}
        </Labelled>
        <button type="submit" className="button" disabled={busy}>
          {busy ? "Requesting…" : "Request payout"}
        </button>
        <ErrorNotice error={error} />
        {requested && (
          <p role="status" className="payout-requested">
            Payout of {creditsText(requested.amountCredits)} ({requested.amountStable} USDC) {requested.status}
            {requested.error ? `: ${requested.error}` : "."}
          </p>
        )}
      </form>

      <h3>Your payouts</h3>
      <ErrorNotice error={payouts.error} onRetry={payouts.reload} />
      {payouts.data && payouts.data.payouts.length === 0 && <p>No payouts yet.</p>}
      {payouts.data && payouts.data.payouts.length > 0 && (
        <div className="table-scroll">
          <table className="payouts">
            <thead>
              <tr>
                <th scope="col">Requested</th>
                <th scope="col">Amount</th>
                <th scope="col">Status</th>
                <th scope="col">Detail</th>
              </tr>
            </thead>
            <tbody>
              {payouts.data.payouts.map((p) => (
                <tr key={p.id} data-payout-id={p.id}>
                  <td>{whenText(p.requestedAt)}</td>
                  <td>
                    {creditsText(p.amountCredits)} ({p.amountStable} USDC)
                  </td>
                  <td>
                    <span className={`badge payout-${p.status}`}>{p.status}</span>
                  </td>
                  <td className="wrap">{p.txSignature ? `transfer ${p.txSignature}` : (p.error ?? "")}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
