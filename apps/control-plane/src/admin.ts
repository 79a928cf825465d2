import fs from "node:fs";
import { creditsToMicro, openRepos } from "@cm/db";
import { loadConfig } from "./config";
import { describeDatabase, sqliteFile } from "./database-location";
import { decodeWallet } from "./services/auth-service";
import { randomId } from "./services/ids";

/**
 * Operator-side tools that must never be reachable from the public API. They
 * talk to the database directly, so only someone with the server's
 * DATABASE_URL can run them. Of the environment they read DATABASE_URL, with
 * the control plane's default (config.ts): a relative SQLite path is read from
 * the repository root, wherever the command runs. A SQLite file that does not
 * exist is refused rather than made: a new empty database is one no control
 * plane reads. Each says which database it wrote to.
 *
 *   npm run admin -- credit <walletAddress> <credits> [note]
 */
const usage = "usage: npm run admin -- credit <walletAddress> <credits> [note]";

async function main(argv: string[]) {
  const [cmd, wallet, amount, ...note] = argv;
  if (cmd !== "credit" || !wallet || !amount) throw new Error(usage);
  try {
    decodeWallet(wallet);
  } catch {
    throw new Error(`${wallet} is not a Solana wallet address`);
  }
  const credits = Number(amount);
  if (!Number.isInteger(credits) || credits <= 0 || credits > 100_000_000)
    throw new Error("credits must be a whole number between 1 and 100,000,000 (1 credit = 1 US cent)");
  const config = loadConfig();
  const database = describeDatabase(config.DATABASE_URL);
  const file = sqliteFile(config.DATABASE_URL);
  if (file && !fs.existsSync(file)) {
    throw new Error(
      `no database at ${file}; nothing was credited. Unset, DATABASE_URL is the control plane's default, data/marketplace.db in the repository, which it makes on its first start (npm start): start it once, or set DATABASE_URL to the database your control plane uses`,
    );
  }
  const repos = await openRepos(config.DATABASE_URL);
  try {
    const now = Date.now();
    const user = await repos.auth.upsertUser(randomId("usr"), wallet, now);
    const description = `admin credit${note.length ? `: ${note.join(" ")}` : ""}`;
    const row = await repos.handle.transaction((tx) =>
      repos.ledger.post(tx, { id: randomId("txn"), userId: user.id, type: "deposit", amountMicro: creditsToMicro(credits), description, createdAt: now }),
    );
    const b = await repos.ledger.balance(user.id);
    console.log(
      `credited ${credits} credits to ${wallet} (user ${user.id}, transaction ${row.id}) in ${database}; available now ${b.availableMicro / 1_000_000}`,
    );
  } finally {
    await repos.handle.close();
  }
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
