// cm cp's tar against GNU tar (this machine's), both ways, and against
// archives that try to write outside the destination. The container's busybox
// tar is met in cp.test.ts.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pack } from "../src/commands/tar";
import { Extractor } from "../src/commands/tar-extract";

const sha256 = (file: string) => createHash("sha256").update(fs.readFileSync(file)).digest("hex");
const LONG = `${"a-rather-long-directory-name/".repeat(4)}and-a-file-name-that-takes-it-past-one-hundred-bytes.bin`;

/** Every file under `dir`: relative path -> sha256, mode, or link target. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (abs: string, rel: string) => {
    for (const name of fs.readdirSync(abs).sort()) {
      const a = path.join(abs, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(a);
      if (st.isSymbolicLink()) out[r] = `-> ${fs.readlinkSync(a)}`;
      else if (st.isDirectory()) {
        out[`${r}/`] = (st.mode & 0o777).toString(8);
        walk(a, r);
      } else out[r] = `${sha256(a)} ${(st.mode & 0o777).toString(8)}`;
    }
  };
  walk(dir, "");
  return out;
}

async function extract(archive: Buffer, dest: string, rename = (e: string) => e as string | undefined) {
  fs.mkdirSync(dest, { recursive: true });
  const x = new Extractor(dest, rename);
  // In odd pieces, as a network delivers it.
  for (let at = 0; at < archive.length; at += 7919) x.push(archive.subarray(at, at + 7919));
  x.end();
  return x;
}

async function packed(src: string, top: string): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for await (const p of pack(src, top)) pieces.push(Buffer.from(p));
  return Buffer.concat(pieces);
}

describe("cm cp's tar", () => {
  let root = "";
  let src = "";
  beforeAll(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "cm-tar-"));
    src = path.join(root, "src");
    fs.mkdirSync(path.join(src, "nested/deeper"), { recursive: true });
    fs.writeFileSync(path.join(src, "blob.bin"), randomBytes(3 * 1024 * 1024 + 17));
    fs.writeFileSync(path.join(src, "empty"), "");
    fs.writeFileSync(path.join(src, "nested/run.sh"), "#!/bin/sh\necho hi\n", { mode: 0o755 });
    fs.writeFileSync(path.join(src, "nested/deeper/ünïcode.txt"), "text\n");
    fs.mkdirSync(path.join(src, path.dirname(LONG)), { recursive: true });
    fs.writeFileSync(path.join(src, LONG), randomBytes(1000));
    fs.symlinkSync("nested/run.sh", path.join(src, "link"));
  });
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it("extracts what it packs, byte for byte, with modes, long names and links", async () => {
    const dest = path.join(root, "roundtrip");
    const x = await extract(await packed(src, "copy"), dest, (e) => (e === "copy" ? "" : e.startsWith("copy/") ? e.slice(5) : undefined));
    expect(tree(dest)).toEqual(tree(src));
    expect(x).toMatchObject({ topType: "dir", skipped: [] });
  });

  it("writes what GNU tar reads, and reads what GNU tar writes (gnu and pax formats)", async () => {
    const byGnu = path.join(root, "by-gnu");
    fs.mkdirSync(byGnu);
    execFileSync("tar", ["-x", "-C", byGnu], { input: await packed(src, "copy") });
    expect(tree(path.join(byGnu, "copy"))).toEqual(tree(src));

    for (const format of ["gnu", "pax"]) {
      const dest = path.join(root, `from-${format}`);
      await extract(execFileSync("tar", ["-c", `--format=${format}`, "-C", root, "src"], { maxBuffer: 64 * 1024 * 1024 }), dest);
      expect(tree(path.join(dest, "src"))).toEqual(tree(src));
    }
  });

  it("writes nothing outside the destination: absolute names, .., and paths through a link the archive made", async () => {
    const evil = path.join(root, "evil");
    const outside = path.join(root, "outside");
    fs.mkdirSync(path.join(evil, "sub"), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(evil, "sub/x"), "x");
    fs.symlinkSync(outside, path.join(evil, "escape"));
    // GNU tar with -P keeps what it is given: a leading / and a "..".
    const archive = execFileSync("tar", ["-c", "-P", "-C", evil, "--transform", "s,^sub/x$,../climbed,", "escape", "sub/x", `${evil}/sub/x`]);
    const withFile = execFileSync("tar", ["-c", "-C", root, "--transform", "s,^evil/sub/x$,escape/written,", "evil/sub/x"]);
    const dest = path.join(root, "safe");
    const first = await extract(archive, dest);
    expect(first.skipped.sort()).toEqual([`${evil}/sub/x`, "../climbed"].sort());
    // The link is made, as a link; a later entry through it is not written there.
    expect(fs.readlinkSync(path.join(dest, "escape"))).toBe(outside);
    const second = await extract(withFile, dest);
    expect(second.skipped).toEqual(["escape/written"]);
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.existsSync(path.join(root, "climbed"))).toBe(false);
  });

  it("follows no link an earlier copy left: a directory, a file or a hard link's source there stays outside", async () => {
    const outside = path.join(root, "home-ssh");
    fs.mkdirSync(outside, { mode: 0o700 });
    fs.writeFileSync(path.join(outside, "authorized_keys"), "mine\n", { mode: 0o600 });
    const dest = path.join(root, "second-copy");
    fs.mkdirSync(dest);
    // What a first copy of a container's link made: results -> the tenant's ~/.ssh, and a file link.
    fs.symlinkSync(outside, path.join(dest, "results"));
    fs.symlinkSync(path.join(outside, "authorized_keys"), path.join(dest, "keys"));
    // The container then makes results a directory of mode 0777 with its own authorized_keys.
    const staged = path.join(root, "staged");
    fs.mkdirSync(path.join(staged, "results"), { recursive: true });
    fs.writeFileSync(path.join(staged, "results/authorized_keys"), "evil\n");
    fs.writeFileSync(path.join(staged, "keys"), "evil\n");
    fs.chmodSync(path.join(staged, "results"), 0o777);
    const archive = execFileSync("tar", ["-c", "-C", staged, "results", "keys"]);
    const x = await extract(archive, dest);
    expect(x.skipped).toEqual([]);
    expect(fs.readFileSync(path.join(outside, "authorized_keys"), "utf8")).toBe("mine\n");
    expect(fs.statSync(outside).mode & 0o777).toBe(0o700);
    // The links were replaced by what the archive holds, not written through.
    expect(fs.lstatSync(path.join(dest, "results")).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(dest, "results/authorized_keys"), "utf8")).toBe("evil\n");
    expect(fs.lstatSync(path.join(dest, "keys")).isFile()).toBe(true);

    // A hard link whose source goes through a link left here copies nothing from outside.
    fs.symlinkSync(outside, path.join(dest, "escape"));
    fs.writeFileSync(path.join(staged, "plain"), "plain\n");
    fs.linkSync(path.join(staged, "plain"), path.join(staged, "twin"));
    const hard = execFileSync("tar", ["-c", "-C", staged, "--transform", "s,^twin$,stolen,;s,^plain$,escape/authorized_keys,", "plain", "twin"]);
    const y = await extract(hard, dest);
    expect(y.skipped.sort()).toEqual(["escape/authorized_keys", "stolen"]);
    expect(fs.existsSync(path.join(dest, "stolen"))).toBe(false);
    expect(fs.readFileSync(path.join(outside, "authorized_keys"), "utf8")).toBe("mine\n");
  });

  it("copies a hard link to a file of the same archive", async () => {
    const staged = path.join(root, "hard-src");
    fs.mkdirSync(staged);
    fs.writeFileSync(path.join(staged, "a"), "same bytes\n", { mode: 0o640 });
    fs.linkSync(path.join(staged, "a"), path.join(staged, "b"));
    const dest = path.join(root, "hard-dest");
    const x = await extract(execFileSync("tar", ["-c", "-C", staged, "a", "b"]), dest);
    expect(x.skipped).toEqual([]);
    expect(tree(dest)).toEqual(tree(staged));
  });

  it("says a cut-off archive is incomplete", async () => {
    const archive = await packed(src, "copy");
    fs.mkdirSync(path.join(root, "cut"));
    const x = new Extractor(path.join(root, "cut"), (e) => e);
    x.push(archive.subarray(0, 100_000));
    expect(() => x.end()).toThrow("the archive ended early");
  });
});
