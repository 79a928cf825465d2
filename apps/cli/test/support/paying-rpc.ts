import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeTransferCheckedInstruction, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { TransactionInstruction, VersionedTransaction } from "@solana/web3.js";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../../../control-plane/test/support/fake-solana-rpc";

/**
 * The tests' Solana RPC, taking payments too: `sendTransaction` lands a signed
 * transferChecked as a node would record it (token balances moved, block time
 * now, finalized); every other call goes to the fake RPC as it is.
 */
export async function startPayingRpc(): Promise<FakeSolanaRpc & { sent: string[] }> {
  const fake = await startFakeSolanaRpc();
  const sent: string[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const body = await read(req);
      const call = JSON.parse(body) as { id: unknown; method: string; params: unknown[] };
      if (call.method !== "sendTransaction") {
        const answer = await fetch(fake.url, { method: "POST", headers: { "content-type": "application/json" }, body });
        res.writeHead(answer.status, { "content-type": "application/json" }).end(await answer.text());
        return;
      }
      const tx = VersionedTransaction.deserialize(Buffer.from(String(call.params[0]), "base64"));
      const signature = fake.addTransaction(tx, landed(tx));
      sent.push(signature);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", result: signature, id: call.id }));
    })().catch(() => res.destroy());
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(Object.create(fake) as FakeSolanaRpc, {
    url,
    sent,
    async close() {
      await new Promise((done) => {
        server.close(done);
        server.closeAllConnections();
      });
      await fake.close();
    },
  });
}

/** The meta a node records for a transaction's transferChecked: the payer's account down, the treasury's up. */
function landed(tx: VersionedTransaction) {
  const keys = tx.message.staticAccountKeys;
  const ix = tx.message.compiledInstructions
    .map(
      (c) =>
        new TransactionInstruction({
          programId: keys[c.programIdIndex]!,
          keys: c.accountKeyIndexes.map((i) => ({ pubkey: keys[i]!, isSigner: false, isWritable: true })),
          data: Buffer.from(c.data),
        }),
    )
    .find((i) => i.programId.equals(TOKEN_PROGRAM_ID) && i.data[0] === 12);
  if (!ix) throw new Error("no transferChecked in the transaction");
  const { keys: accounts, data } = decodeTransferCheckedInstruction(ix);
  const indexOf = (k: { toBase58(): string }) => keys.findIndex((x) => x.toBase58() === k.toBase58());
  const owner = accounts.owner.pubkey.toBase58();
  // Whose the destination is: the treasury named in the associated-token-account instruction before it.
  const ata = tx.message.compiledInstructions.find((c) => c.accountKeyIndexes[1] === indexOf(accounts.destination.pubkey));
  const treasury = ata ? keys[ata.accountKeyIndexes[2]!]!.toBase58() : "unknown";
  const balance = (account: { toBase58(): string }, who: string, amount: bigint) => ({
    accountIndex: indexOf(account),
    mint: accounts.mint.pubkey.toBase58(),
    owner: who,
    programId: TOKEN_PROGRAM_ID.toBase58(),
    amountBaseUnits: amount,
    decimals: data.decimals,
  });
  const start = 1_000_000_000n;
  const byIndex = (a: { accountIndex: number }, b: { accountIndex: number }) => a.accountIndex - b.accountIndex;
  return {
    err: null,
    fee: 5_000,
    slot: 330_000_500,
    blockTimeSeconds: Math.floor(Date.now() / 1000),
    preTokenBalances: [balance(accounts.source.pubkey, owner, start), balance(accounts.destination.pubkey, treasury, 0n)].sort(byIndex),
    postTokenBalances: [balance(accounts.source.pubkey, owner, start - data.amount), balance(accounts.destination.pubkey, treasury, data.amount)].sort(byIndex),
  };
}

async function read(req: IncomingMessage): Promise<string> {
  let body = "";
  for await (const chunk of req) body += String(chunk);
  return body;
}
