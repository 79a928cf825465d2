import { ACCOUNT_SIZE, AccountLayout, AccountState, MINT_SIZE, MintLayout, TOKEN_2022_PROGRAM_ID } from "@solana/spl-token";
import { PublicKey, SystemProgram } from "@solana/web3.js";
import bs58 from "bs58";
import type { RpcAnswer } from "./fake-rpc-send";
import { uiTokenAmount } from "./fake-rpc-wire-format";

/**
 * Pure encoders from the fake chain's accounts to the `value` of `getAccountInfo` /
 * `getMultipleAccounts` as an Agave 2.x node answers it: the account's real bytes
 * (spl-token's layouts) in base64 or base58, or the node's jsonParsed form. What
 * `@solana/pay`'s createTransfer reads through spl-token's getMint and getAccount.
 */

export type FakeAccount =
  /** A system account: a wallet with lamports and no data. */
  | { kind: "wallet"; lamports: number }
  | { kind: "mint"; decimals: number; programId: string; supplyBaseUnits: bigint }
  | { kind: "token"; mint: string; owner: string; programId: string; amountBaseUnits: bigint; decimals: number };

// What the rent-exempt minimum comes to for each size, as on mainnet.
const MINT_LAMPORTS = 1_461_600;
const TOKEN_ACCOUNT_LAMPORTS = 2_039_280;
/** The node's rentEpoch for rent-exempt accounts is u64::MAX, which JSON.parse rounds to this very number. */
const RENT_EXEMPT_EPOCH = 2 ** 64;
const BASE58_MAX_BYTES = 128;

export function encodeAccount(account: FakeAccount, encoding: string): RpcAnswer {
  const bytes = accountBytes(account);
  const owner = account.kind === "wallet" ? SystemProgram.programId.toBase58() : account.programId;
  const lamports = account.kind === "wallet" ? account.lamports : account.kind === "mint" ? MINT_LAMPORTS : TOKEN_ACCOUNT_LAMPORTS;
  const base = { executable: false, lamports, owner, rentEpoch: RENT_EXEMPT_EPOCH, space: bytes.length };
  switch (encoding) {
    case "base64":
      return { result: { ...base, data: [Buffer.from(bytes).toString("base64"), "base64"] } };
    case "base58":
      if (bytes.length > BASE58_MAX_BYTES) {
        return { error: { code: -32600, message: "Encoded binary (base 58) data should be less than 128 bytes, please use Base64 encoding." } };
      }
      return { result: { ...base, data: [bs58.encode(bytes), "base58"] } };
    case "jsonParsed": {
      const parsed = parsedData(account);
      // The node falls back to base64 for what it cannot parse (a wallet's empty data).
      return { result: { ...base, data: parsed ?? [Buffer.from(bytes).toString("base64"), "base64"] } };
    }
    default:
      return {
        error: {
          code: -32602,
          message: `Invalid params: unknown variant \`${encoding}\`, expected one of \`binary\`, \`base58\`, \`base64\`, \`jsonParsed\`, \`base64+zstd\`.`,
        },
      };
  }
}

function accountBytes(account: FakeAccount): Uint8Array {
  if (account.kind === "wallet") return new Uint8Array(0);
  if (account.kind === "mint") {
    const data = Buffer.alloc(MINT_SIZE);
    MintLayout.encode(
      {
        mintAuthorityOption: 0,
        mintAuthority: PublicKey.default,
        supply: account.supplyBaseUnits,
        decimals: account.decimals,
        isInitialized: true,
        freezeAuthorityOption: 0,
        freezeAuthority: PublicKey.default,
      },
      data,
    );
    return data;
  }
  const data = Buffer.alloc(ACCOUNT_SIZE);
  AccountLayout.encode(
    {
      mint: new PublicKey(account.mint),
      owner: new PublicKey(account.owner),
      amount: account.amountBaseUnits,
      delegateOption: 0,
      delegate: PublicKey.default,
      state: AccountState.Initialized,
      isNativeOption: 0,
      isNative: 0n,
      delegatedAmount: 0n,
      closeAuthorityOption: 0,
      closeAuthority: PublicKey.default,
    },
    data,
  );
  return data;
}

function parsedData(account: FakeAccount): unknown {
  if (account.kind === "wallet") return null;
  const program = account.programId === TOKEN_2022_PROGRAM_ID.toBase58() ? "spl-token-2022" : "spl-token";
  if (account.kind === "mint") {
    const info = { decimals: account.decimals, freezeAuthority: null, isInitialized: true, mintAuthority: null, supply: account.supplyBaseUnits.toString() };
    return { parsed: { info, type: "mint" }, program, space: MINT_SIZE };
  }
  const info = {
    isNative: false,
    mint: account.mint,
    owner: account.owner,
    state: "initialized",
    tokenAmount: uiTokenAmount(account.amountBaseUnits, account.decimals),
  };
  return { parsed: { info, type: "account" }, program, space: ACCOUNT_SIZE };
}
