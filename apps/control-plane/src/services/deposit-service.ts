import { type CreditPackageRow, creditsToMicro, type DepositRow, microToCredits, type Repos } from "@cm/db";
import { DEPOSIT_REFUSAL_CODES, type DepositRefusal, type DepositState, ERROR_CODES } from "@cm/protocol";
import { creditsToReceive } from "../catalog/credit-packages";
import { ApiError } from "../errors";
import { decodeWallet } from "./auth-service";
import type { ChainClient } from "./chain/chain-client";
import { depositTransferRequestUrl, newReference } from "./chain/transfer-request";
import { type ExpectedDeposit, verifyDeposit } from "./chain/verify-deposit";
import type { Clock, IdGenerator } from "./ids";

export type PaymentSettings = {
  treasuryWallet: string;
  stableMint: string;
  stableDecimals: number;
  depositTtlS: number;
  depositGraceS: number;
  /** Deposits one account may hold pending and unexpired at once (MAX_OPEN_DEPOSITS). */
  maxOpenDeposits: number;
};

/** USD cents to the stablecoin's base units (USDC: 6 decimals, so 1 cent = 10,000), in integers. */
export const centsToBaseUnits = (cents: number, decimals: number) => (BigInt(cents) * 10n ** BigInt(decimals)) / 100n;
/** Base units as the number of whole tokens the API shows (10000000 -> 10). */
export const baseUnitsToTokens = (base: bigint, decimals: number) => Number(base) / 10 ** decimals;

export function presentPackage(p: CreditPackageRow) {
  return {
    id: p.id,
    name: p.name,
    credits: p.credits,
    priceUsd: p.priceUsdCents / 100,
    priceStable: p.priceUsdCents / 100,
    bonusPercent: p.bonusPercent,
    creditsToReceive: creditsToReceive(p),
  };
}

/** What a wallet shows as the payee of a transfer request. */
export const DEPOSIT_LABEL = "Compute marketplace";

export function presentDeposit(d: DepositRow & { reference: string }) {
  return {
    depositId: d.id,
    amountStable: baseUnitsToTokens(BigInt(d.amountStableBase), d.stableDecimals),
    creditsToReceive: microToCredits(d.creditsMicro),
    treasuryWallet: d.treasuryWallet,
    stableMint: d.stableMint,
    expiresAt: new Date(d.expiresAt).toISOString(),
    reference: d.reference,
    transferRequestUrl: depositTransferRequestUrl(d, d.reference, DEPOSIT_LABEL),
  };
}

/** The refusal a deposit records, in the API's words; none on a confirmed deposit. */
function presentRefusal(d: DepositRow): DepositRefusal | undefined {
  const code = DEPOSIT_REFUSAL_CODES.find((c) => c === d.refusalCode);
  if (d.status === "confirmed" || !code || !d.refusalSignature) return undefined;
  return { code, message: ERROR_CODES[code].description, txSignature: d.refusalSignature };
}

/** A deposit as its owner sees it: expired once past expiresAt unless credited. */
export function presentDepositState(d: DepositRow, nowMs: number): DepositState {
  const status = d.status === "confirmed" ? "confirmed" : nowMs > d.expiresAt ? "expired" : "pending";
  const refusal = presentRefusal(d);
  return {
    depositId: d.id,
    status,
    amountStable: baseUnitsToTokens(BigInt(d.amountStableBase), d.stableDecimals),
    creditsToReceive: microToCredits(d.creditsMicro),
    treasuryWallet: d.treasuryWallet,
    stableMint: d.stableMint,
    expiresAt: new Date(d.expiresAt).toISOString(),
    ...(d.reference ? { reference: d.reference } : {}),
    ...(d.reference && status === "pending" ? { transferRequestUrl: depositTransferRequestUrl(d, d.reference, DEPOSIT_LABEL) } : {}),
    ...(d.txSignature ? { txSignature: d.txSignature } : {}),
    ...(d.confirmedAt ? { confirmedAt: new Date(d.confirmedAt).toISOString() } : {}),
    ...(refusal ? { refusal } : {}),
  };
}

/** What pays `d`: the checks the explicit confirm and a search by reference both make. */
export function expectedPayment(d: DepositRow): ExpectedDeposit {
  return {
    treasuryOwner: d.treasuryWallet,
    mint: d.stableMint,
    amountBaseUnits: BigInt(d.amountStableBase),
    payer: d.walletAddress,
    notAfterMs: d.expiresAt,
  };
}

export function createDepositService(repos: Repos, chain: ChainClient, clock: Clock, ids: IdGenerator, s: PaymentSettings) {
  return {
    async initiate(user: { id: string; walletAddress: string }, packageId: string, walletAddress: string) {
      // What is wrong with the request is said first, whatever this installation's configuration.
      decodeWallet(walletAddress);
      // The payer check compares against this wallet. Binding it to the signed-in
      // wallet stops anyone from naming a stranger's payment as theirs.
      if (walletAddress !== user.walletAddress) throw new ApiError("DEPOSIT_WALLET_MISMATCH", "walletAddress must be the wallet you signed in with");
      const pkg = await repos.deposits.package(packageId);
      if (!pkg) throw new ApiError("PACKAGE_NOT_FOUND", `no credit package ${packageId}`);
      if (!s.treasuryWallet) throw new ApiError("PAYMENTS_NOT_CONFIGURED");
      const now = clock.now();
      const created = await repos.deposits.create(
        {
          id: ids("dpst"),
          userId: user.id,
          packageId: pkg.id,
          walletAddress,
          amountStableBase: Number(centsToBaseUnits(pkg.priceUsdCents, s.stableDecimals)),
          stableDecimals: s.stableDecimals,
          creditsMicro: creditsToMicro(creditsToReceive(pkg)),
          treasuryWallet: s.treasuryWallet,
          stableMint: s.stableMint,
          expiresAt: now + s.depositTtlS * 1000,
          createdAt: now,
          reference: newReference(),
        },
        s.maxOpenDeposits,
      );
      if ("refused" in created) {
        // The oldest frees its place once past its expiresAt: the first whole second after it.
        const retryAfterS = Math.floor((created.oldestExpiresAt - now) / 1000) + 1;
        throw new ApiError(
          "TOO_MANY_OPEN_DEPOSITS",
          `you already have ${s.maxOpenDeposits} deposits pending, as many as one account may: pay one of them, or wait until one expires (the oldest at ${new Date(created.oldestExpiresAt).toISOString()})`,
          undefined,
          { "Retry-After": String(retryAfterS) },
        );
      }
      return created;
    },

    async state(userId: string, depositId: string): Promise<DepositState> {
      const deposit = await repos.deposits.get(depositId, userId);
      if (!deposit) throw new ApiError("DEPOSIT_NOT_FOUND", `no deposit ${depositId}`);
      return presentDepositState(deposit, clock.now());
    },

    /** Returns the ledger row when the signature already credited this deposit; refuses it if it credited another. */
    async refuseUsedSignature(depositId: string, signature: string) {
      const used = await repos.deposits.transactionBySignature(signature);
      if (used && used.depositId !== depositId) throw new ApiError("SIGNATURE_ALREADY_USED", "this transaction already credited a deposit");
      return used;
    },

    async confirm(userId: string, depositId: string, signature: string) {
      const deposit = await repos.deposits.get(depositId, userId);
      if (!deposit) throw new ApiError("DEPOSIT_NOT_FOUND", `no deposit ${depositId}`);
      if (deposit.status === "confirmed") {
        if (deposit.txSignature !== signature) throw new ApiError("DEPOSIT_ALREADY_CONFIRMED", `deposit ${depositId} was confirmed with another transaction`);
        return { transaction: (await repos.deposits.transactionBySignature(signature))!, replay: true };
      }
      // Within the grace a payment made before expiresAt still counts; verifyDeposit refuses later ones.
      if (clock.now() > deposit.expiresAt + s.depositGraceS * 1000)
        throw new ApiError("DEPOSIT_EXPIRED", `deposit ${depositId} expired at ${new Date(deposit.expiresAt).toISOString()}; start a new one`);
      const mine = await this.refuseUsedSignature(deposit.id, signature);
      if (mine) return { transaction: mine, replay: true };

      const lookup = await chain.getTransfer(signature);
      if (lookup.kind === "unavailable") {
        throw new ApiError(
          "CHAIN_UNAVAILABLE",
          `the Solana RPC node did not answer (${lookup.reason}); the deposit is still pending, retry shortly`,
          undefined,
          { "Retry-After": "5" },
        );
      }
      if (lookup.kind === "not_found") {
        throw new ApiError(
          "TX_NOT_FOUND",
          "the transaction is not visible on chain yet at the required commitment; the deposit is still pending, retry shortly",
          undefined,
          { "Retry-After": "5" },
        );
      }
      const verdict = verifyDeposit(lookup.tx, expectedPayment(deposit));
      if (!verdict.ok) {
        await repos.deposits.recordRefusal(deposit.id, verdict.code, signature);
        throw new ApiError(verdict.code, verdict.message);
      }

      const outcome = await repos.deposits.confirm(deposit.id, signature, ids("txn"), clock.now());
      switch (outcome.kind) {
        case "credited":
          return { transaction: outcome.transaction, replay: false };
        case "signature_used": {
          // A concurrent confirm of this very deposit may have won: that is a replay, not a reuse.
          const won = await this.refuseUsedSignature(deposit.id, signature);
          if (!won) throw new ApiError("SIGNATURE_ALREADY_USED", "this transaction already credited a deposit");
          return { transaction: won, replay: true };
        }
        case "already_confirmed":
          if (outcome.deposit.txSignature !== signature)
            throw new ApiError("DEPOSIT_ALREADY_CONFIRMED", `deposit ${depositId} was confirmed with another transaction`);
          return { transaction: outcome.transaction ?? (await repos.deposits.transactionBySignature(signature))!, replay: true };
        case "not_pending":
          throw new ApiError("DEPOSIT_EXPIRED", `deposit ${depositId} is no longer pending`);
      }
    },
  };
}
export type DepositService = ReturnType<typeof createDepositService>;
