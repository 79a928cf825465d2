// Registry passwords at rest: AES-256-GCM under one key from the configuration,
// each sealed with its credential's id as associated data, so a sealed value
// copied onto another row does not open there.
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { existsSync, linkSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { sqliteFile } from "../database-location";

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Beside the embedded database, when REGISTRY_CREDENTIALS_KEY is not set. */
export const REGISTRY_KEY_FILE = "registry-credentials.key";

/** A key or key file the control plane will not start with: the operator's to fix, like any configuration mistake. */
export class RegistryKeyError extends Error {}

/** 32 bytes written as base64 (44 characters) or hex (64); undefined for anything else. */
export function parseRegistryKey(text: string): Buffer | undefined {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, "hex");
  if (/^[A-Za-z0-9+/]{43}=$/.test(t)) return Buffer.from(t, "base64");
  return undefined;
}

export interface RegistrySecrets {
  seal(id: string, password: string): string;
  /** The password; throws when the key is not the one it was sealed with or the value was changed. */
  open(id: string, sealed: string): string;
}

export function createRegistrySecrets(key: Buffer): RegistrySecrets {
  if (key.length !== KEY_BYTES) throw new RegistryKeyError(`the registry credentials key must be ${KEY_BYTES} bytes`);
  return {
    seal(id, password) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      cipher.setAAD(Buffer.from(id));
      const ciphertext = Buffer.concat([cipher.update(password, "utf8"), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString("base64");
    },
    open(id, sealed) {
      const bytes = Buffer.from(sealed, "base64");
      if (bytes.length < IV_BYTES + TAG_BYTES) throw new Error("the sealed registry password is too short");
      const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(id));
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8");
    },
  };
}

/**
 * The key to seal with: REGISTRY_CREDENTIALS_KEY when set. Unset, the embedded
 * database gets one of its own, made once and kept beside it (0600, as its
 * data), so `npm start` needs no setting; an in-memory database a fresh one per
 * process. PostgreSQL gets none: its replicas must share one key, which only the
 * operator can give them all, so credentials are refused until it is set.
 */
export function resolveRegistryKey(configured: string, databaseUrl: string): Buffer | undefined {
  if (configured !== "") {
    const key = parseRegistryKey(configured);
    if (!key)
      throw new RegistryKeyError("REGISTRY_CREDENTIALS_KEY must be 32 bytes, written as 64 hex digits or 44 characters of base64 (openssl rand -base64 32)");
    return key;
  }
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) return undefined;
  const db = sqliteFile(databaseUrl);
  if (!db) return randomBytes(KEY_BYTES);
  return keyFileBeside(path.join(path.dirname(db), REGISTRY_KEY_FILE));
}

function keyFileBeside(file: string): Buffer {
  if (!existsSync(file)) {
    // Written whole, 0600 from its first byte, under a name of its own, then linked into place: of two
    // processes starting at once one key wins, and neither ever reads a half-written file.
    const draft = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
    try {
      writeFileSync(draft, `${randomBytes(KEY_BYTES).toString("base64")}\n`, { mode: 0o600, flag: "wx" });
      linkSync(draft, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw new RegistryKeyError(`cannot write ${file}: ${(error as Error).message}`);
    } finally {
      rmSync(draft, { force: true });
    }
  }
  const mode = statSync(file).mode;
  if ((mode & 0o077) !== 0)
    throw new RegistryKeyError(
      `${file} has mode ${(mode & 0o777).toString(8).padStart(4, "0")}; others may read the key that seals registry passwords. Run: chmod 600 ${file}`,
    );
  const key = parseRegistryKey(readFileSync(file, "utf8"));
  if (!key)
    throw new RegistryKeyError(`${file} does not hold a 32-byte key in base64; move it away to make a new one (stored registry passwords then no longer open)`);
  return key;
}
