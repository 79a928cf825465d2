// Who owns a release and who may change it: a tarball's entries as its headers say, and what
// under an installed tree someone other than its owner could write.
import { lstatSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { gunzipSync } from "node:zlib";

export interface TarEntry {
  name: string;
  type: "file" | "directory" | "symlink" | "other";
  /** the permission bits with setuid, setgid and sticky (07777) */
  mode: number;
  uid: number;
  gid: number;
  uname: string;
  gname: string;
}

const BLOCK = 512;
const text = (header: Buffer, at: number, length: number) => header.toString("latin1", at, at + length).replace(/\0.*$/s, "");
const octal = (header: Buffer, at: number, length: number) => Number.parseInt(text(header, at, length).trim() || "0", 8);

/** Every entry of a .tar.gz, read from its ustar/GNU headers (GNU long names and pax paths followed). */
export function tarEntries(tarball: string): TarEntry[] {
  const tar = gunzipSync(readFileSync(tarball));
  const entries: TarEntry[] = [];
  let longName: string | undefined;
  for (let at = 0; at + BLOCK <= tar.length; ) {
    const header = tar.subarray(at, at + BLOCK);
    if (header.every((byte) => byte === 0)) break;
    const size = octal(header, 124, 12);
    const flag = text(header, 156, 1);
    const data = tar.subarray(at + BLOCK, at + BLOCK + size);
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    if (flag === "L") longName = data.toString("utf8").replace(/\0.*$/s, "");
    else if (flag === "x") longName = /\d+ path=([^\n]*)\n/.exec(data.toString("utf8"))?.[1];
    else if (flag !== "K" && flag !== "g") {
      const prefix = text(header, 345, 155);
      entries.push({
        name: longName ?? (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100)),
        type: flag === "0" || flag === "" ? "file" : flag === "5" ? "directory" : flag === "2" ? "symlink" : "other",
        mode: octal(header, 100, 8) & 0o7777,
        uid: octal(header, 108, 8),
        gid: octal(header, 116, 8),
        uname: text(header, 265, 32),
        gname: text(header, 297, 32),
      });
      longName = undefined;
    }
  }
  return entries;
}

/** Every path under `dir` (links aside: their own mode means nothing) that its group or others may write, with its mode. */
export function writableByOthers(dir: string, top = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isSymbolicLink()) return [];
    const mode = lstatSync(path).mode & 0o7777;
    const own = mode & 0o022 ? [`${relative(top, path)} ${mode.toString(8)}`] : [];
    return entry.isDirectory() ? [...own, ...writableByOthers(path, top)] : own;
  });
}

/**
 * The entries of a release tarball that an install would not take as root's code, each with
 * what is wrong: owners other than root (0, by name and number), directories not 0755, files
 * neither 0644 nor 0755, anything but files, directories and links.
 */
export function notPackedForRoot(tarball: string): string[] {
  return tarEntries(tarball).flatMap((e) => {
    const modes = e.type === "directory" ? [0o755] : e.type === "file" ? [0o644, 0o755] : e.type === "symlink" ? [e.mode] : [];
    const owned = e.uid === 0 && e.gid === 0 && e.uname === "root" && e.gname === "root";
    return owned && modes.includes(e.mode) ? [] : [`${e.name} ${e.type} ${e.mode.toString(8)} ${e.uname}:${e.gname} ${e.uid}:${e.gid}`];
  });
}
