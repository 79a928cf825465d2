import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import { createRegistrySecrets, parseRegistryKey, REGISTRY_KEY_FILE, RegistryKeyError, resolveRegistryKey } from "../../src/services/registry-secrets";

const PASSWORD = "hunter2-registry-p@ss";

describe("sealing registry passwords", () => {
  const key = randomBytes(32);
  const secrets = createRegistrySecrets(key);

  it("opens what it sealed, and the sealed text holds neither the password nor its base64", () => {
    const sealed = secrets.seal("rcred_1", PASSWORD);
    expect(secrets.open("rcred_1", sealed)).toBe(PASSWORD);
    expect(sealed).not.toContain(PASSWORD);
    expect(Buffer.from(sealed, "base64").includes(Buffer.from(PASSWORD))).toBe(false);
    expect(sealed).not.toContain(Buffer.from(PASSWORD).toString("base64").slice(0, 12));
    // A fresh IV each time: the same password never seals to the same text.
    expect(secrets.seal("rcred_1", PASSWORD)).not.toBe(sealed);
  });

  it("does not open under another key, for another credential's id, or once changed", () => {
    const sealed = secrets.seal("rcred_1", PASSWORD);
    expect(() => createRegistrySecrets(randomBytes(32)).open("rcred_1", sealed)).toThrow();
    expect(() => secrets.open("rcred_2", sealed)).toThrow();
    const bytes = Buffer.from(sealed, "base64");
    bytes[bytes.length - 1]! ^= 1;
    expect(() => secrets.open("rcred_1", bytes.toString("base64"))).toThrow();
    expect(() => secrets.open("rcred_1", "c2hvcnQ=")).toThrow();
  });

  it("reads a key of 32 bytes as hex or base64, and nothing else", () => {
    expect(parseRegistryKey(key.toString("hex"))).toEqual(key);
    expect(parseRegistryKey(key.toString("base64"))).toEqual(key);
    expect(parseRegistryKey(randomBytes(16).toString("base64"))).toBeUndefined();
    expect(parseRegistryKey("correct horse battery staple")).toBeUndefined();
    expect(() => loadConfig({ REGISTRY_CREDENTIALS_KEY: "short" })).toThrow(/REGISTRY_CREDENTIALS_KEY: must be 32 bytes/);
    expect(loadConfig({ REGISTRY_CREDENTIALS_KEY: key.toString("hex") }).REGISTRY_CREDENTIALS_KEY).toBe(key.toString("hex"));
  });
});

describe("where the key comes from", () => {
  const dirs: string[] = [];
  const dir = () => {
    const d = mkdtempSync(path.join(tmpdir(), "cm-registry-key-"));
    dirs.push(d);
    return d;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("uses REGISTRY_CREDENTIALS_KEY when set, whatever the database", () => {
    const key = randomBytes(32);
    expect(resolveRegistryKey(key.toString("base64"), "postgres://u:p@db/x")).toEqual(key);
    expect(() => resolveRegistryKey("nope", "file::memory:")).toThrow(RegistryKeyError);
  });

  it("gives PostgreSQL no key of its own: its replicas must share one", () => {
    expect(resolveRegistryKey("", "postgres://u:p@db/x")).toBeUndefined();
  });

  it("makes the embedded database a key file beside it, 0600, and reads the same key at the next start", () => {
    const d = dir();
    const url = `file:${path.join(d, "marketplace.db")}`;
    const first = resolveRegistryKey("", url)!;
    const file = path.join(d, REGISTRY_KEY_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(resolveRegistryKey("", url)).toEqual(first);
    // What it sealed opens after a restart.
    const sealed = createRegistrySecrets(first).seal("rcred_1", PASSWORD);
    expect(createRegistrySecrets(resolveRegistryKey("", url)!).open("rcred_1", sealed)).toBe(PASSWORD);
    expect(readFileSync(file, "utf8")).not.toContain(PASSWORD);
  });

  it("gives every start on one database the same key, and leaves no draft of it beside the database", () => {
    const d = dir();
    const url = `file:${path.join(d, "marketplace.db")}`;
    const keys = Array.from({ length: 4 }, () => resolveRegistryKey("", url));
    for (const key of keys) expect(key).toEqual(keys[0]);
    expect(readdirSync(d)).toEqual([REGISTRY_KEY_FILE]);
  });

  it("refuses a key file others may read, naming the fix", () => {
    const d = dir();
    const file = path.join(d, REGISTRY_KEY_FILE);
    writeFileSync(file, `${randomBytes(32).toString("base64")}\n`);
    chmodSync(file, 0o644);
    expect(() => resolveRegistryKey("", `file:${path.join(d, "marketplace.db")}`)).toThrow(`Run: chmod 600 ${file}`);
  });
});
