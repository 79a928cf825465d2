import bs58 from "bs58";
import { ApiError, ChainError, NetworkError } from "./errors";
import { sleep } from "./follow";
import { call } from "./routes";
import { type Signer, walletAddress } from "./signer";
import type { Transport } from "./transport";
import type { ConfirmDepositResponse, Deposit, InitiateDepositResponse } from "./types";

/**
 * Who pays: a keypair (anything with its 64-byte `secretKey`: a web3.js Keypair,
 * keypairSigner's answer), a wallet that signs transactions (Phantom and the
 * wallet adapters: `{ publicKey, signTransaction }`; a Wallet Standard wallet's
 * solana:signTransaction answers the signed transaction's bytes, which do as well),
 * or a wallet that signs and sends them itself (Wallet Standard's
 * solana:signAndSendTransaction, given the serialized transaction: its signature,
 * as bytes or base58).
 */
export type Payer =
  | { publicKey?: Signer["publicKey"]; secretKey: Uint8Array }
  | { publicKey: Signer["publicKey"]; signTransaction<T>(transaction: T): Promise<T | Uint8Array> }
  | { publicKey: Signer["publicKey"]; signAndSendTransaction(transaction: Uint8Array): Promise<Uint8Array | string> };

export interface BuyOptions {
  /** The Solana JSON-RPC URL to send the payment through. */
  rpcUrl: string;
  /** The stablecoin's decimals (USDC: 6). */
  decimals?: number;
  /** How long to wait for the payment to be confirmed on chain, and then for the API to see it (default 90 s). */
  timeoutMs?: number;
  /**
   * Called at each step, for progress output, with the deposit being paid (to follow it with
   * waitForDeposit should this call fail after the payment was sent). After "initiated" the
   * payer is asked to sign.
   */
  onStep?: (step: "initiated" | "sent" | "confirmed-on-chain", detail: string, deposit: Deposit) => void;
}

/**
 * Buys a credit package with USDC: initiates the deposit, pays it from `payer`
 * (creating the treasury's token account if it has none, then transferChecked),
 * waits for the chain to confirm, and confirms the deposit with the API,
 * retrying while the API's RPC does not see the transaction yet.
 * Loads @solana/web3.js only when called; the two token instructions are built
 * here (spl-token would drag in bigint-buffer and its warning on every run).
 */
export async function buyCredits(t: Transport, packageId: string, payer: Payer, options: BuyOptions): Promise<ConfirmDepositResponse> {
  const web3 = await loadWeb3();
  const owner = payer.publicKey
    ? new web3.PublicKey(walletAddress(payer.publicKey))
    : web3.Keypair.fromSecretKey((payer as { secretKey: Uint8Array }).secretKey).publicKey;
  const { deposit }: InitiateDepositResponse = await call(t, "post", "/credits/deposit/initiate", {
    auth: true,
    body: { packageId, walletAddress: owner.toBase58() },
  });
  options.onStep?.("initiated", `deposit ${deposit.depositId}: ${deposit.amountStable} to ${deposit.treasuryWallet}`, deposit);

  const decimals = options.decimals ?? 6;
  const mint = new web3.PublicKey(deposit.stableMint);
  const treasury = new web3.PublicKey(deposit.treasuryWallet);
  const token = tokenInstructions(web3);
  const source = token.associatedAccount(owner, mint);
  // The treasury may be a PDA or a multisig vault (off the curve): its associated account all the same.
  const destination = token.associatedAccount(treasury, mint);
  const amount = BigInt(deposit.amountStable.toFixed(decimals).replace(".", ""));
  const connection = new web3.Connection(options.rpcUrl, "confirmed");
  const deadline = Date.now() + (options.timeoutMs ?? 90_000);

  const transfer = token.transferChecked(source, mint, destination, owner, amount, decimals);
  // The deposit's reference as an extra read-only key, as Solana Pay wallets add it: the control
  // plane's watcher then finds and credits the payment even if this process dies before confirming.
  transfer.keys.push({ pubkey: new web3.PublicKey(deposit.reference), isSigner: false, isWritable: false });

  const { blockhash } = await chainCall(() => connection.getLatestBlockhash("confirmed"));
  const message = new web3.TransactionMessage({
    payerKey: owner,
    recentBlockhash: blockhash,
    instructions: [
      token.createAssociatedAccountIdempotent(owner, destination, treasury, mint),
      transfer,
      // Names the deposit on chain, and keeps two purchases of one package under one blockhash distinct transactions.
      token.memo(`cm deposit ${deposit.depositId}`),
    ],
  }).compileToV0Message();
  const tx = new web3.VersionedTransaction(message);
  let signature: string;
  if ("signAndSendTransaction" in payer) {
    // The wallet sends it through its own RPC; the confirmation below reads it through ours.
    const sent = await payer.signAndSendTransaction(tx.serialize());
    signature = typeof sent === "string" ? sent : bs58.encode(sent);
  } else {
    let raw: Uint8Array;
    if ("secretKey" in payer) {
      tx.sign([web3.Keypair.fromSecretKey(payer.secretKey)]);
      raw = tx.serialize();
    } else {
      const signed = await payer.signTransaction(tx);
      raw = signed instanceof Uint8Array ? signed : signed.serialize();
    }
    signature = await chainCall(() => connection.sendRawTransaction(raw, { maxRetries: 5 }), web3);
  }
  options.onStep?.("sent", signature, deposit);
  // Polled rather than subscribed: works through any RPC, no WebSocket to keep.
  for (;;) {
    const { value } = await chainCall(() => connection.getSignatureStatuses([signature]));
    const status = value[0];
    if (status?.err) throw new ChainError("TX_REJECTED", `the payment ${signature} failed on chain: ${JSON.stringify(status.err)}`);
    if (status?.confirmationStatus === "confirmed" || status?.confirmationStatus === "finalized") break;
    if (Date.now() > deadline) {
      throw new ChainError("TX_NOT_CONFIRMED", `the payment ${signature} was not confirmed in time; if it lands, confirm deposit ${deposit.depositId} with it`);
    }
    await sleep(500);
  }
  options.onStep?.("confirmed-on-chain", signature, deposit);

  for (;;) {
    try {
      return await call(t, "post", "/credits/deposit/confirm", {
        auth: true,
        body: { depositId: deposit.depositId, txSignature: signature },
      });
    } catch (err) {
      const later = err instanceof ApiError && (err.code === "TX_NOT_FOUND" || err.code === "CHAIN_UNAVAILABLE");
      if (!(later || err instanceof NetworkError) || Date.now() > deadline) throw err;
      await sleep(Math.min(5_000, ((err instanceof ApiError && err.retryAfterS) || 1) * 1_000));
    }
  }
}

type Web3 = typeof import("@solana/web3.js");

async function loadWeb3(): Promise<Web3> {
  try {
    return await import("@solana/web3.js");
  } catch (err) {
    throw new ChainError("CHAIN_LIBRARIES_MISSING", `buying credits needs @solana/web3.js installed: ${(err as Error).message}`);
  }
}

/** The SPL Token program's transferChecked, the Associated Token Account program's CreateIdempotent and a memo, as their programs define them. */
export function tokenInstructions(web3: Web3) {
  const TOKEN_PROGRAM = new web3.PublicKey("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
  const ATA_PROGRAM = new web3.PublicKey("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL");
  const MEMO_PROGRAM = new web3.PublicKey("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
  type Key = InstanceType<Web3["PublicKey"]>;
  const meta = (pubkey: Key, isSigner: boolean, isWritable: boolean) => ({ pubkey, isSigner, isWritable });
  return {
    associatedAccount: (owner: Key, mint: Key): Key =>
      web3.PublicKey.findProgramAddressSync([owner.toBytes(), TOKEN_PROGRAM.toBytes(), mint.toBytes()], ATA_PROGRAM)[0],
    createAssociatedAccountIdempotent: (payer: Key, account: Key, owner: Key, mint: Key) =>
      new web3.TransactionInstruction({
        programId: ATA_PROGRAM,
        keys: [
          meta(payer, true, true),
          meta(account, false, true),
          meta(owner, false, false),
          meta(mint, false, false),
          meta(web3.SystemProgram.programId, false, false),
          meta(TOKEN_PROGRAM, false, false),
        ],
        data: new Uint8Array([1]) as Buffer,
      }),
    memo: (text: string) => new web3.TransactionInstruction({ programId: MEMO_PROGRAM, keys: [], data: new TextEncoder().encode(text) as Buffer }),
    transferChecked(source: Key, mint: Key, destination: Key, owner: Key, amount: bigint, decimals: number) {
      const data = new Uint8Array(10);
      data[0] = 12;
      new DataView(data.buffer).setBigUint64(1, amount, true);
      data[9] = decimals;
      return new web3.TransactionInstruction({
        programId: TOKEN_PROGRAM,
        keys: [meta(source, false, true), meta(mint, false, false), meta(destination, false, true), meta(owner, true, false)],
        data: data as Buffer,
      });
    },
  };
}

async function chainCall<T>(call: () => Promise<T>, web3?: Web3): Promise<T> {
  try {
    return await call();
  } catch (err) {
    // The RPC's preflight said no (too little USDC, a bad signature): the chain refused the payment, the RPC did not fail.
    if (web3 && err instanceof web3.SendTransactionError) {
      const { message, logs = [] } = err.transactionError;
      const why = logs.flatMap((l) => /^Program log: Error: (.+)$/.exec(l)?.slice(1) ?? []);
      throw new ChainError("TX_REJECTED", `the Solana RPC refused the payment: ${message}${why.length ? ` (${why.join("; ")})` : ""}`, { cause: err });
    }
    throw new ChainError("CHAIN_UNAVAILABLE", `the Solana RPC refused or did not answer: ${(err as Error).message}`, { cause: err });
  }
}
