// The tar that cm cp speaks with a container's own tar (busybox's, GNU's):
// ustar headers, GNU long names ('L', 'K') past 100 bytes, and PAX paths and
// sizes read back. Only what copying needs: files, directories, symbolic and
// hard links. Nothing is ever written outside the destination.
import fs from "node:fs";
import path from "node:path";

const BLOCK = 512;
/** What is read of a file at once while packing it. */
const READ_BYTES = 64 * 1024;
/** A long name or a PAX header this large is no path: a broken or hostile archive. */
const MAX_META_BYTES = 1024 * 1024;
/** The largest size 11 octal digits hold; past it the size is written in base 256, as GNU tar does. */
const MAX_OCTAL_SIZE = 8 ** 11 - 1;

type EntryType = "file" | "dir" | "symlink";

function field(buf: Buffer, offset: number, length: number, value: number) {
  buf.write(`${value.toString(8).padStart(length - 1, "0")}\0`, offset, length, "ascii");
}

function header(name: string, type: string, o: { mode?: number; size?: number; mtimeS?: number; linkname?: string } = {}): Buffer {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, "utf8");
  field(h, 100, 8, o.mode ?? 0o644);
  field(h, 108, 8, 0);
  field(h, 116, 8, 0);
  const size = o.size ?? 0;
  if (size > MAX_OCTAL_SIZE) {
    h[124] = 0x80;
    h.writeBigUInt64BE(BigInt(size), 124 + 4);
  } else field(h, 124, 12, size);
  field(h, 136, 12, Math.max(0, Math.floor(o.mtimeS ?? 0)));
  h.write(type, 156, 1, "ascii");
  if (o.linkname) h.write(o.linkname, 157, 100, "utf8");
  h.write("ustar\0", 257, 6, "ascii");
  h.write("00", 263, 2, "ascii");
  h.write("root", 265, 32, "ascii");
  h.write("root", 297, 32, "ascii");
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "ascii");
  return h;
}

const padding = (size: number) => Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);

/** A GNU long name or link name ('L' / 'K') before the header whose field cannot hold it. */
function longName(type: "L" | "K", value: string): Buffer[] {
  const data = Buffer.from(`${value}\0`, "utf8");
  return [header("././@LongLink", type, { size: data.length }), data, padding(data.length)];
}

function entryHeader(name: string, type: string, o: { mode: number; size: number; mtimeS: number; linkname?: string }): Buffer[] {
  const out: Buffer[] = [];
  if (Buffer.byteLength(name) > 100) out.push(...longName("L", name));
  if (o.linkname !== undefined && Buffer.byteLength(o.linkname) > 100) out.push(...longName("K", o.linkname));
  out.push(header(name, type, o));
  return out;
}

export type PackSummary = { files: number; bytes: number; skipped: string[] };

/**
 * The archive of `src` (a file, or a directory and everything under it), its
 * top entry named `top` (the name it gets at the destination, or "." for a
 * directory's contents alone), in pieces the caller sends as it can. Symbolic
 * links are archived as links, never followed; sockets, FIFOs and devices are
 * left out and named in `summary.skipped`.
 */
export async function* pack(src: string, top: string, summary: PackSummary = { files: 0, bytes: 0, skipped: [] }): AsyncGenerator<Buffer> {
  async function* walk(abs: string, name: string): AsyncGenerator<Buffer> {
    const st = await fs.promises.lstat(abs);
    const mtimeS = st.mtimeMs / 1000;
    const mode = st.mode & 0o7777;
    if (st.isDirectory()) {
      if (name !== ".") yield* entryHeader(`${name}/`, "5", { mode, size: 0, mtimeS });
      const children = (await fs.promises.readdir(abs)).sort();
      for (const child of children) yield* walk(path.join(abs, child), name === "." ? child : `${name}/${child}`);
    } else if (st.isSymbolicLink()) {
      yield* entryHeader(name, "2", { mode, size: 0, mtimeS, linkname: await fs.promises.readlink(abs) });
    } else if (st.isFile()) {
      yield* entryHeader(name, "0", { mode, size: st.size, mtimeS });
      // The size is in the header already: a file that shrinks meanwhile is padded with zeros, one that grows is cut.
      const fd = await fs.promises.open(abs, "r");
      try {
        let left = st.size;
        while (left > 0) {
          const chunk = Buffer.alloc(Math.min(READ_BYTES, left));
          const { bytesRead } = await fd.read(chunk, 0, chunk.length, st.size - left);
          if (bytesRead === 0) {
            yield Buffer.alloc(left);
            break;
          }
          left -= bytesRead;
          yield chunk.subarray(0, bytesRead);
        }
      } finally {
        await fd.close();
      }
      yield padding(st.size);
      summary.files++;
      summary.bytes += st.size;
    } else {
      summary.skipped.push(abs);
    }
  }
  yield* walk(src, top);
  yield Buffer.alloc(2 * BLOCK);
}

/** Where an archive's entry goes, relative to the destination; undefined: not copied. */
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

export class ExtractError extends Error {}

/**
 * Writes an archive, pushed to it as it arrives, under `dest`. Each entry's
 * name goes through `rename` first; one that would land outside `dest`
 * (absolute, "..") is refused. Symbolic links are made last, once every file
 * is written, so that no entry is ever written through a link the archive
 * made; directories get their modes and times last too.
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
  private current: { target: string; mode: number; mtimeS: number } | undefined;
  private readonly dirs: Array<{ target: string; mode: number; mtimeS: number }> = [];
  private readonly links: Array<{ target: string; linkname: string }> = [];
  /** The first entry's type: what the archive's top is (a file or a directory). */
  topType: EntryType | undefined;
  readonly skipped: string[] = [];
  files = 0;
  bytes = 0;

  constructor(
    private readonly dest: string,
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
    if (this.topType === undefined && kind) {
      this.topType = kind;
      this.checkTop(kind);
    }
    const renamed = this.rename(name.replace(/^(\.\/)+/, ""));
    const rel = renamed === undefined ? undefined : safeRelative(renamed);
    if (rel === undefined || kind === undefined) {
      if (renamed !== undefined || kind === undefined) this.skipped.push(name);
      this.beginData("data", type === "5" || type === "2" || type === "1" ? 0 : size);
      return;
    }
    const target = rel === "" ? this.dest : path.join(this.dest, rel);
    if (this.throughLink(rel)) {
      this.skipped.push(name);
      this.beginData("data", type === "0" || type === "\0" || type === "7" ? size : 0);
      return;
    }
    if (type === "5") {
      fs.mkdirSync(target, { recursive: true });
      this.dirs.push({ target, mode, mtimeS });
      this.beginData("data", 0);
      return;
    }
    fs.mkdirSync(path.dirname(target), { recursive: true });
    if (type === "2") {
      this.links.push({ target, linkname });
      this.beginData("data", 0);
      return;
    }
    this.replaceable(target);
    if (type === "1") {
      const from = this.rename(linkname.replace(/^(\.\/)+/, ""));
      const fromRel = from === undefined ? undefined : safeRelative(from);
      if (fromRel === undefined || !fs.existsSync(path.join(this.dest, fromRel))) this.skipped.push(name);
      else fs.copyFileSync(path.join(this.dest, fromRel), target);
      this.beginData("data", 0);
      return;
    }
    this.fd = fs.openSync(target, "w", mode);
    this.current = { target, mode, mtimeS };
    this.files++;
    this.bytes += size;
    this.beginData("data", size);
  }

  /**
   * Whether a directory on the way to `rel` is a symbolic link (one a copy
   * before this one made, say): written through, the entry would land wherever
   * the link points, outside the destination.
   */
  private throughLink(rel: string): boolean {
    const parts = rel.split(path.sep).filter(Boolean);
    let at = this.dest;
    for (const part of parts.slice(0, -1)) {
      at = path.join(at, part);
      const st = fs.lstatSync(at, { throwIfNoEntry: false });
      if (!st) return false;
      if (st.isSymbolicLink()) return true;
    }
    return false;
  }

  /** What is at `target` may be replaced by a file: nothing, a file, or a link (removed: never written through). */
  private replaceable(target: string) {
    const st = fs.lstatSync(target, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) throw new ExtractError(`${target} is a directory: a file cannot replace it`);
    fs.unlinkSync(target);
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
    for (const { target, linkname } of this.links) {
      try {
        if (fs.lstatSync(target, { throwIfNoEntry: false })?.isSymbolicLink()) fs.unlinkSync(target);
        fs.symlinkSync(linkname, target);
      } catch {
        this.skipped.push(target);
      }
    }
    // Deepest first: setting a parent's time before its children are done would be undone by them.
    // Always readable and writable by whoever copied it, so that copying again or removing it works.
    for (const d of this.dirs.reverse()) {
      fs.chmodSync(d.target, d.mode | 0o700);
      fs.utimesSync(d.target, d.mtimeS, d.mtimeS);
    }
  }
}
