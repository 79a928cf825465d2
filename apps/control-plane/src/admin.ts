import fs from "node:fs";
import { creditsToMicro, microToCredits, openRepos } from "@cm/db";
import { version } from "../package.json";
import { backup, restore } from "./admin-backup";
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
 * Installed from a release it is cm-admin; from a checkout, `npm run admin --`:
 *   cm-admin credit <walletAddress> <credits> [note]
 *   cm-admin refund <deploymentId> <credits> <reason>
 *   cm-admin payouts [list]
 *   cm-admin payouts approve [payoutId]
 *   cm-admin payouts reject <payoutId> <reason>
 *   cm-admin backup [file]
 *   cm-admin restore <file>
 *   cm-admin version | --version | --help
 */
const usage = [
  "usage: cm-admin credit <walletAddress> <credits> [note]",
  "       cm-admin refund <deploymentId> <credits> <reason>",
  "       cm-admin payouts [list]                 requested (waiting) and sending payouts",
  "       cm-admin payouts approve [payoutId]     let one requested payout (or all of them) be sent",
  "       cm-admin payouts reject <payoutId> <reason>   turn one down before it is sent: it fails, its amount is available again",
  "       cm-admin backup [FILE]                  a consistent copy of the embedded database, the control plane running or not",
  "                                               (default: beside it, named with the time); for PostgreSQL, the pg_dump line to run",
  "       cm-admin restore FILE                   with the control plane stopped: replace the embedded database with a backup,",
  "                                               keeping the one replaced beside it",
  "       cm-admin version                        print the version (also --version)",
  "Reads DATABASE_URL and CM_HOME as the control plane does; installed, bin/cm-admin first loads them from",
  "/etc/cm-control-plane/control-plane.env (CM_CONTROL_PLANE_ENV=FILE names another) when this user may read it.",
  "From a checkout: npm run admin -- <the same>",
].join("\n");

async function main(argv: string[]) {
  if (argv.length === 1 && (argv[0] === "version" || argv[0] === "--version")) return void console.log(version);
  if (argv.length === 1 && (argv[0] === "help" || argv[0] === "--help" || argv[0] === "-h")) return void console.log(usage);
  if (argv[0] === "refund") return refund(argv.slice(1));
  if (argv[0] === "payouts") return payouts(argv.slice(1));
  if (argv[0] === "backup") return backup(argv.slice(1));
  if (argv[0] === "restore") return restore(argv.slice(1));
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
  const { repos, database } = await open("credited");
  try {
    const now = Date.now();
    const user = await repos.auth.upsertUser(randomId("usr"), wallet, now);
    const description = `admin credit${note.length ? `: ${note.join(" ")}` : ""}`;
    const row = await repos.handle.transaction((tx) =>
      repos.ledger.post(tx, { id: randomId("txn"), userId: user.id, type: "deposit", amountMicro: creditsToMicro(credits), description, createdAt: now }),
    );
    const b = await repos.ledger.balance(user.id);
    console.log(
      `credited ${credits} credits to ${wallet} (user ${user.id}, transaction ${row.id}) in ${database}; available now ${microToCredits(b.availableMicro)}`,
    );
  } finally {
    await repos.handle.close();
  }
}

/**
 * Gives a tenant credits back for a deployment, as a `refund` row on their
 * ledger; it is taken from what the node's operator earned on it (never below
 * zero; their requested payouts that held it fail), the rest from the
 * platform's fee. At most what the deployment cost, less earlier refunds.
 */
async function refund([deploymentId, amount, ...reason]: string[]) {
  if (!deploymentId || !amount || reason.length === 0) throw new Error(usage);
  const credits = Number(amount);
  if (!/^\d+(\.\d{1,6})?$/.test(amount) || credits <= 0 || credits > 100_000_000)
    throw new Error("credits must be a positive number of at most 100,000,000 with at most 6 decimals (1 credit = 1 US cent)");
  const { repos, database } = await open("refunded");
  try {
    const ids = randomId;
    const outcome = await repos.billing.locked(deploymentId, (db, dep) =>
      repos.earnings.refund(db, dep, { amountMicro: creditsToMicro(credits), description: `refund: ${reason.join(" ")}`, nowMs: Date.now(), ids }),
    );
    if (!outcome) throw new Error(`no deployment ${deploymentId} in ${database}; nothing was refunded`);
    if (!outcome.ok)
      throw new Error(
        `deployment ${deploymentId} has ${microToCredits(outcome.refundableMicro)} credits left to refund (what it cost less earlier refunds); nothing was refunded`,
      );
    console.log(
      `refunded ${credits} credits for ${deploymentId} (transaction ${outcome.transactionId}) in ${database}: ${microToCredits(outcome.fromOperatorMicro)} from the operator's earnings, ${microToCredits(outcome.fromFeeMicro)} from the platform's fee`,
    );
    for (const p of outcome.failedPayouts)
      console.log(
        `failed payout ${p.id} (${microToCredits(p.amountMicro)} credits, not sent): it held earnings the refund took back; its operator may ask again`,
      );
  } finally {
    await repos.handle.close();
  }
}

/**
 * PAYOUTS=manual: requests wait for an administrator. Approving only marks them;
 * the running control plane's sender pays them on its next turn (every
 * PAYOUT_SEND_INTERVAL_MS), exactly once, as it pays PAYOUTS=auto's.
 */
async function payouts([sub = "list", id, ...rest]: string[]) {
  if (sub === "reject") return reject(id, rest);
  if (!["list", "approve"].includes(sub) || rest.length > 0 || (sub === "list" && id)) throw new Error(usage);
  const { repos, database } = await open(sub === "approve" ? "approved" : "listed");
  try {
    const show = (p: { id: string; status: string; amountMicro: number; walletAddress: string; requestedAt: number; error: string | null }) =>
      `${p.id}  ${p.status.padEnd(9)}  ${String(microToCredits(p.amountMicro)).padStart(10)} credits  to ${p.walletAddress}  requested ${new Date(p.requestedAt).toISOString()}${p.error ? `  (${p.error})` : ""}`;
    if (sub === "list") {
      const waiting = [...(await repos.payouts.list(undefined, 1, 100, "requested")).rows, ...(await repos.payouts.list(undefined, 1, 100, "sending")).rows];
      if (waiting.length === 0) return console.log(`no payouts waiting or sending in ${database}`);
      for (const p of waiting) console.log(`${show(p)}${p.status === "requested" && p.approvedAt !== null ? "  (approved)" : ""}`);
      return;
    }
    if (id) {
      const p = await repos.payouts.get(id);
      if (!p) throw new Error(`no payout ${id} in ${database}; nothing was approved`);
      if (p.status !== "requested" || p.approvedAt !== null)
        throw new Error(`payout ${id} is ${p.status}${p.approvedAt !== null ? ", approved already" : ""}; nothing was approved`);
    }
    const approved = await repos.payouts.approve(id, Date.now());
    if (approved.length === 0) return console.log(`no requested payouts to approve in ${database}`);
    for (const p of approved) console.log(`approved ${show(p)}`);
    console.log(`${approved.length} payout(s) approved in ${database}; the control plane sends them on its next turn (PAYOUT_KEYPAIR must be set there)`);
  } finally {
    await repos.handle.close();
  }
}

/** Turns a requested payout down: it fails with the reason, which its operator sees, and the credits are theirs to request again. */
async function reject(id: string | undefined, reason: string[]) {
  if (!id || reason.length === 0) throw new Error(usage);
  const { repos, database } = await open("rejected");
  try {
    const row = await repos.payouts.reject(id, `rejected by an administrator: ${reason.join(" ")}`, Date.now());
    if (!row) {
      const p = await repos.payouts.get(id);
      throw new Error(
        p
          ? `payout ${id} is ${p.status}${p.signature ? ` (transfer ${p.signature} signed)` : ""}; only a requested payout can be rejected; nothing changed`
          : `no payout ${id} in ${database}; nothing was rejected`,
      );
    }
    console.log(
      `rejected ${row.id} (${microToCredits(row.amountMicro)} credits to ${row.walletAddress}) in ${database}; the amount is available to its operator again`,
    );
  } finally {
    await repos.handle.close();
  }
}

/** The control plane's database; a SQLite file that does not exist is refused, not made. */
async function open(verb: string) {
  const config = loadConfig();
  const database = describeDatabase(config.DATABASE_URL);
  const file = sqliteFile(config.DATABASE_URL);
  if (file && !fs.existsSync(file)) {
    throw new Error(
      `no database at ${file}; nothing was ${verb}. Unset, DATABASE_URL is the control plane's default, data/marketplace.db in the repository, which it makes on its first start (npm start): start it once, or set DATABASE_URL to the database your control plane uses`,
    );
  }
  return { repos: await openRepos(config.DATABASE_URL), database };
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
