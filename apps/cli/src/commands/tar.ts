// The tar that cm cp speaks with a container's own tar (busybox's, GNU's):
// ustar headers, GNU long names ('L', 'K') past 100 bytes. Only what copying
// needs: files, directories, symbolic and hard links. Reading one back is
// tar-extract.ts.
import fs from "node:fs";
import path from "node:path";

export const BLOCK = 512;
/** What is read of a file at once while packing it. */
const READ_BYTES = 64 * 1024;
/** The largest size 11 octal digits hold; past it the size is written in base 256, as GNU tar does. */
const MAX_OCTAL_SIZE = 8 ** 11 - 1;

export type EntryType = "file" | "dir" | "symlink";

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

export type PackSummary = { files: number; symlinks: number; bytes: number; skipped: string[] };

/**
 * The archive of `src` (a file, or a directory and everything under it), its
 * top entry named `top` (the name it gets at the destination, or "." for a
 * directory's contents alone), in pieces the caller sends as it can. Symbolic
 * links are archived as links, never followed; sockets, FIFOs and devices are
 * left out and named in `summary.skipped`.
 */
export async function* pack(src: string, top: string, summary: PackSummary = { files: 0, symlinks: 0, bytes: 0, skipped: [] }): AsyncGenerator<Buffer> {
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
      summary.symlinks++;
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
