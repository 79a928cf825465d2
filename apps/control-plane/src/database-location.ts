// Where DATABASE_URL points, the same for every command that opens the
// database: `npm start`, the control plane run by a workspace's own script, and
// `npm run admin`. A relative SQLite path used to be read from whichever
// directory the command ran in, so an admin command run elsewhere made a new
// empty database there, credited it, and the running control plane never saw it.
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Where relative SQLite paths, the default `file:./data/marketplace.db` included, are read
 * from: CM_HOME when set (a release's env file sets it to its state directory, since a
 * bundle's own location says nothing about where state belongs), else the repository's root.
 */
export const REPO_ROOT = process.env.CM_HOME ? path.resolve(process.env.CM_HOME) : path.resolve(fileURLToPath(new URL("../../..", import.meta.url)));

/** Where `npm start` keeps its state: the default database and the local node's token. */
export const DATA_DIR = path.join(REPO_ROOT, "data");

const POSTGRES = /^postgres(ql)?:\/\//;

/** The SQLite file a DATABASE_URL names, absolute; undefined for PostgreSQL and in-memory databases. */
export function sqliteFile(url: string): string | undefined {
  if (POSTGRES.test(url)) return undefined;
  const file = url.replace(/^file:/, "");
  if (file === "" || file === ":memory:") return undefined;
  return path.resolve(REPO_ROOT, file);
}

/** DATABASE_URL with a relative SQLite path made absolute from the repository root; anything else as it is. */
export function resolveDatabaseUrl(url: string): string {
  const file = sqliteFile(url);
  return file ? `file:${file}` : url;
}

/** The database as an operator recognises it, without its password: the SQLite file, or the PostgreSQL URL. */
export function describeDatabase(url: string): string {
  const file = sqliteFile(url);
  if (file) return file;
  if (!POSTGRES.test(url)) return url;
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "a PostgreSQL database (its URL does not parse)";
  }
}
