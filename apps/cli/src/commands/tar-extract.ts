// Reading a container's archive back onto this machine. The archive comes from
// a container (or a node) the tenant does not control, and the destination may
// hold what earlier copies left, links included: nothing written, chmodded or
// timed here follows a symbolic link below the root the caller trusts. Every
// directory on the way is lstat'ed, files are created O_EXCL|O_NOFOLLOW after
// what was there is unlinked, and directories are changed through an fd opened
// O_NOFOLLOW. node-tar 7 (the kept library) checks links below its cwd as
// this does, but follows a link at the cwd itself (its checkCwd stats it),
// where the second copy of a container's link lands, and it would still need
// this file's renaming of the top entry and its refusal of a directory onto a
// file: the same root choice in cp.ts and no fewer lines.
import fs from "node:fs";
import path from "node:path";
import { BLOCK, type EntryType } from "./tar";

/** A long name or a PAX header this large is no path: a broken or hostile archive. */
const MAX_META_BYTES = 1024 * 1024;
/** Absent on Windows, where cm cp's links are not made anyway. */
const NOFOLLOW = fs.constants.O_NOFOLLOW ?? 0;
const DIRECTORY = fs.constants.O_DIRECTORY ?? 0;
const CREATE_FILE = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | NOFOLLOW;

/** Where an archive's entry goes, relative to the root; undefined: not copied. */
export type Rename = (entry: string) => string | undefined;

/** What an archive entry may not be: absolute, or climbing out with "..". */
function safeRelative(rel: string): string | undefined {
  const parts = rel.split("/").filter((p) => p !== "" && p !== ".");
  if (rel.startsWith("/") || parts.includes("..")) return undefined;
  return parts.join(path.sep);
}

function octal(h: Buffer, offset: number, length: number): number {
  if (h[offset]! & 0x80) {
    // base 256, big-endian, in the bytes after the marker
    let n = 0;
    for (let i = offset + 1; i < offset + length; i++) n = n * 256 + h[i]!;
    return n;
  }
  const text = h
    .toString("ascii", offset, offset + length)
    .replace(/\0.*$/s, "")
    .trim();
  return text === "" ? 0 : Number.parseInt(text, 8);
}

const cString = (h: Buffer, offset: number, length: number) => {
  const end = h.indexOf(0, offset);
  return h.toString("utf8", offset, end < 0 || end > offset + length ? offset + length : end);
};

/** PAX records: "<length> <key>=<value>\n"... */
function paxRecords(data: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space < 0) break;
    const length = Number.parseInt(data.toString("ascii", at, space), 10);
    if (!(length > 0)) break;
    const record = data.toString("utf8", space + 1, at + length - 1);
    const eq = record.indexOf("=");
    if (eq > 0) out.set(record.slice(0, eq), record.slice(eq + 1));
    at += length;
  }
  return out;
}

const lstat = (p: string) => fs.lstatSync(p, { throwIfNoEntry: false });

export class ExtractError extends Error {}

/**
 * Writes an archive, pushed to it as it arrives, under `root`: a directory
 * that exists, named by the tenant and taken as it is (links above it are
 * theirs). Each entry's name goes through `rename` first; one that would land
 * outside (absolute, "..", or through a symbolic link below `root`) is left
 * out and named in `skipped`. A link where an entry goes is replaced, never
 * followed. Symbolic links are made last, once every file is written, and
 * directories get their modes and times last too.
 */
export class Extractor {
  private buffered: Buffer = Buffer.alloc(0);
  private state: "header" | "data" | "meta" | "done" = "header";
  private left = 0;
  private pad = 0;
  private fd: number | undefined;
  private metaKind: "L" | "K" | "x" | "skip" = "skip";
  private meta: Buffer[] = [];
  private next: { path?: string; linkpath?: string; size?: number } = {};
  private current: { mode: number; mtimeS: number } | undefined;
  private readonly dirs: Array<{ rel: string; mode: number; mtimeS: number }> = [];
  private readonly links: Array<{ rel: string; linkname: string }> = [];
  /** Files this archive wrote: a hard link may only name one of them, never what was here before. */
  private readonly written = new Set<string>();
  /** The first entry's type: what the archive's top is (a file or a directory). */
  topType: EntryType | undefined;
  readonly skipped: string[] = [];
  files = 0;
  symlinks = 0;
  bytes = 0;

  constructor(
    private readonly root: string,
    private readonly rename: Rename,
    /** Called with the top entry's type before anything is written: throw to refuse (a directory onto a file). */
    private readonly checkTop: (type: EntryType) => void = () => undefined,
  ) {}

  get done(): boolean {
    return this.state === "done";
  }

  push(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    while (this.state !== "done") {
      if (this.state === "data" || this.state === "meta") {
        if (this.left > 0) {
          if (this.buffered.length === 0) return;
          const piece = this.buffered.subarray(0, Math.min(this.left, this.buffered.length));
          this.buffered = this.buffered.subarray(piece.length);
          this.left -= piece.length;
          if (this.state === "data" && this.fd !== undefined) fs.writeSync(this.fd, piece);
          if (this.state === "meta") this.meta.push(Buffer.from(piece));
          if (this.left > 0) return;
        }
        if (this.buffered.length < this.pad) return;
        this.buffered = this.buffered.subarray(this.pad);
        if (this.state === "data") this.closeFile();
        else this.endMeta();
        this.state = "header";
        continue;
      }
      if (this.buffered.length < BLOCK) return;
      const h = this.buffered.subarray(0, BLOCK);
      this.buffered = this.buffered.subarray(BLOCK);
      if (h.every((b) => b === 0)) {
        this.finish();
        return;
      }
      this.entry(Buffer.from(h));
    }
  }

  /** The stream ended: anything short of the archive's end is a cut-off copy. */
  end(): void {
    if (this.state !== "done") {
      this.closeFile();
      throw new ExtractError("the archive ended early: the copy is incomplete");
    }
  }

  private entry(h: Buffer) {
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
    if (sum !== octal(h, 148, 8)) throw new ExtractError("not a tar archive (bad header checksum)");
    const type = String.fromCharCode(h[156]!) || "0";
    const size = this.next.size ?? octal(h, 124, 12);
    if (type === "L" || type === "K" || type === "x" || type === "g") {
      if (size > MAX_META_BYTES) throw new ExtractError(`an archive header of ${size} bytes`);
      this.metaKind = type === "g" ? "skip" : type;
      this.beginData("meta", size);
      return;
    }
    const prefix = cString(h, 345, 155);
    const name = this.next.path ?? (prefix ? `${prefix}/${cString(h, 0, 100)}` : cString(h, 0, 100));
    const linkname = this.next.linkpath ?? cString(h, 157, 100);
    this.next = {};
    const mode = octal(h, 100, 8) & 0o777;
    const mtimeS = octal(h, 136, 12);
    const kind: EntryType | undefined =
      type === "5" ? "dir" : type === "2" ? "symlink" : type === "0" || type === "\0" || type === "7" || type === "1" ? "file" : undefined;
    const dataSize = type === "0" || type === "\0" || type === "7" ? size : 0;
    if (this.topType === undefined && kind) {
      this.topType = kind;
      this.checkTop(kind);
    }
    const renamed = this.rename(name.replace(/^(\.\/)+/, ""));
    const rel = renamed === undefined ? undefined : safeRelative(renamed);
    // The root itself is only ever a directory the tenant named: an entry may set its mode, never replace it.
    if (rel === undefined || kind === undefined || (rel === "" && kind !== "dir") || !this.parentReady(rel)) {
      if (renamed !== undefined || kind === undefined) this.skipped.push(name);
      this.beginData("data", dataSize);
      return;
    }
    const target = path.join(this.root, rel);
    if (kind === "dir") {
      this.makeDirectory(target);
      this.dirs.push({ rel, mode, mtimeS });
    } else if (kind === "symlink") {
      this.links.push({ rel, linkname });
    } else if (type === "1") {
      const from = this.rename(linkname.replace(/^(\.\/)+/, ""));
      const fromRel = from === undefined ? undefined : safeRelative(from);
      if (fromRel === undefined || !this.written.has(fromRel)) this.skipped.push(name);
      else this.copyWritten(fromRel, target);
    } else {
      this.clear(target);
      this.fd = fs.openSync(target, CREATE_FILE, mode);
      this.current = { mode, mtimeS };
      this.written.add(rel);
      this.files++;
      this.bytes += size;
    }
    this.beginData("data", dataSize);
  }

  /**
   * Makes the directories on the way to `rel` that are missing; false when one
   * of them is a symbolic link (one a copy before this one left, say) or not a
   * directory: written through it, the entry would land wherever it points.
   */
  private parentReady(rel: string): boolean {
    let at = this.root;
    for (const part of rel.split(path.sep).filter(Boolean).slice(0, -1)) {
      at = path.join(at, part);
      const st = lstat(at);
      if (!st) fs.mkdirSync(at);
      else if (!st.isDirectory()) return false;
    }
    return true;
  }

  /** A directory at `target`: a link there is replaced by one, a file refuses it. */
  private makeDirectory(target: string) {
    const st = lstat(target);
    if (st?.isDirectory()) return;
    if (st?.isSymbolicLink()) fs.unlinkSync(target);
    else if (st) throw new ExtractError(`${target} is a file: a directory cannot replace it`);
    fs.mkdirSync(target);
  }

  /** Whatever is at `target` is removed for a file: nothing, a file, or a link (never written through). */
  private clear(target: string) {
    const st = lstat(target);
    if (!st) return;
    if (st.isDirectory()) throw new ExtractError(`${target} is a directory: a file cannot replace it`);
    fs.unlinkSync(target);
  }

  /** A hard link's copy, from a file this archive wrote, read without following a link. */
  private copyWritten(fromRel: string, target: string) {
    this.clear(target);
    const from = fs.openSync(path.join(this.root, fromRel), fs.constants.O_RDONLY | NOFOLLOW);
    try {
      const st = fs.fstatSync(from);
      const to = fs.openSync(target, CREATE_FILE, st.mode & 0o777);
      try {
        const chunk = Buffer.alloc(64 * 1024);
        for (let n = fs.readSync(from, chunk); n > 0; n = fs.readSync(from, chunk)) fs.writeSync(to, chunk, 0, n);
        fs.futimesSync(to, st.atime, st.mtime);
      } finally {
        fs.closeSync(to);
      }
    } finally {
      fs.closeSync(from);
    }
    this.written.add(path.relative(this.root, target));
  }

  private beginData(state: "data" | "meta", size: number) {
    this.state = state;
    this.left = size;
    this.pad = (BLOCK - (size % BLOCK)) % BLOCK;
    this.meta = [];
  }

  private endMeta() {
    const data = Buffer.concat(this.meta);
    if (this.metaKind === "L") this.next.path = data.toString("utf8").replace(/\0.*$/s, "");
    else if (this.metaKind === "K") this.next.linkpath = data.toString("utf8").replace(/\0.*$/s, "");
    else if (this.metaKind === "x") {
      const pax = paxRecords(data);
      if (pax.has("path")) this.next.path = pax.get("path")!;
      if (pax.has("linkpath")) this.next.linkpath = pax.get("linkpath")!;
      if (pax.has("size")) this.next.size = Number(pax.get("size"));
    }
  }

  private closeFile() {
    if (this.fd === undefined) return;
    const { mode, mtimeS } = this.current!;
    // The umask applied at open: the mode is the archive's.
    fs.fchmodSync(this.fd, mode);
    fs.futimesSync(this.fd, mtimeS, mtimeS);
    fs.closeSync(this.fd);
    this.fd = undefined;
    this.current = undefined;
  }

  private finish() {
    this.state = "done";
    for (const { rel, linkname } of this.links) {
      const target = path.join(this.root, rel);
      try {
        if (!this.parentReady(rel)) throw new ExtractError("through a link");
        if (lstat(target)?.isSymbolicLink()) fs.unlinkSync(target);
        fs.symlinkSync(linkname, target);
        this.symlinks++;
      } catch {
        this.skipped.push(target);
      }
    }
    // Deepest first: setting a parent's time before its children are done would be undone by them.
    // Always readable and writable by whoever copied it, so that copying again or removing it works.
    for (const d of this.dirs.reverse()) {
      if (!this.parentReady(d.rel)) continue;
      let fd: number;
      try {
        fd = fs.openSync(path.join(this.root, d.rel), fs.constants.O_RDONLY | DIRECTORY | NOFOLLOW);
      } catch {
        continue; // a link made in its place: its mode and time are not this copy's to set
      }
      try {
        fs.fchmodSync(fd, d.mode | 0o700);
        fs.futimesSync(fd, d.mtimeS, d.mtimeS);
      } finally {
        fs.closeSync(fd);
      }
    }
  }
}
