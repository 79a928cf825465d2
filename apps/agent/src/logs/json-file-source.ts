// Reads a container's json-file log straight from disk, the way log collectors
// tail files: Docker does no work for it, and rotation is followed exactly (the
// renamed file is read to its end before the next one), which Docker's own
// follow fails at. Each line is one JSON object, {"log":"text\n","stream":...,"time":...};
// a line longer than 16 KB comes as several objects, all but the last without "\n".

import type { FileHandle } from "node:fs/promises";
import { open, readFile, stat } from "node:fs/promises";
import type { LogCursor } from "@cm/protocol";
import type { Logger } from "../logger";
import { dockerTimestampToIso } from "../runtime/log-lines";
import type { LogLine } from "../runtime/types";
import { dockerTsToNs } from "./docker-ts";
import type { LogSource } from "./log-source";

const READ_CHUNK_BYTES = 1024 * 1024;
/** lines returned by one readNew; the shipper reads again at once when it got this many */
const MAX_LINES_PER_READ = 50_000;
/** rotated files are <path>.1 (newest) to <path>.<max-file - 1> */
const MAX_ROTATED_FILES = 20;
const NEWLINE = 0x0a;

interface LogFile {
  path: string;
  ino: number;
}

type Stream = LogLine["stream"];

export class JsonFileLogSource implements LogSource {
  readonly kind = "json-file";
  private file: { handle: FileHandle; ino: number; offset: number } | undefined;
  /** bytes of a line not yet complete at the end of the last read */
  private rest: Buffer = Buffer.alloc(0);
  /** the pieces of a long line read so far, per stream */
  private partial: Partial<Record<Stream, { ts: string; text: string }>> = {};
  /** the stamp of the last line returned: where the caller's cursor is when it took them all */
  private returnedUpTo: string | null | undefined;

  constructor(
    private readonly path: string,
    private readonly logger: Logger,
  ) {}

  async readNew(after: LogCursor): Promise<LogLine[]> {
    // The caller did not take all it was given (it waits for acknowledgements): find its cursor again.
    if (this.file && after.dockerTs !== this.returnedUpTo) await this.close();
    if (!this.file) {
      await this.position(after);
      this.returnedUpTo = after.dockerTs;
    }
    if (!this.file) return [];
    const lines: LogLine[] = [];
    while (lines.length < MAX_LINES_PER_READ) {
      if ((await this.readChunk(lines)) > 0) continue;
      if (!(await this.followRotation(lines))) break;
    }
    if (lines.length > 0) this.returnedUpTo = lines[lines.length - 1]!.dockerTimestamp;
    return lines;
  }

  async close(): Promise<void> {
    await this.file?.handle.close().catch(() => {});
    this.file = undefined;
  }

  /** Opens the file holding the first line after the cursor, at that line. */
  private async position(after: LogCursor): Promise<void> {
    const files = await this.files();
    if (files.length === 0) return; // not written yet
    const cursorNs = after.dockerTs === null ? undefined : dockerTsToNs(after.dockerTs);
    if (after.dockerTs === null || cursorNs === undefined) return this.openAt(files[0]!, 0);
    for (let i = files.length - 1; i >= 0; i--) {
      const content = await readFile(files[i]!.path).catch(() => undefined);
      if (!content || content.length === 0) continue;
      const firstNs = dockerTsToNs(timeOf(content.toString("utf8", 0, Math.max(0, content.indexOf(NEWLINE)))));
      // The cursor is in an older file, unless this is the oldest there is.
      if (firstNs !== undefined && firstNs > cursorNs && i > 0) continue;
      return this.openAt(files[i]!, offsetAfter(content, after.dockerTs, cursorNs));
    }
    return this.openAt(files[0]!, 0);
  }

  private async openAt(file: LogFile, offset: number): Promise<void> {
    const handle = await open(file.path, "r");
    this.file = { handle, ino: (await handle.stat()).ino, offset };
    this.rest = Buffer.alloc(0);
    this.partial = {};
  }

  /** The log's files that exist, oldest first. */
  private async files(): Promise<LogFile[]> {
    const paths = [...Array.from({ length: MAX_ROTATED_FILES }, (_, i) => `${this.path}.${MAX_ROTATED_FILES - i}`), this.path];
    const found = await Promise.all(
      paths.map((path) =>
        stat(path).then(
          (s) => ({ path, ino: s.ino }),
          () => undefined,
        ),
      ),
    );
    return found.filter((file): file is LogFile => file !== undefined);
  }

  /** Reads and parses the next chunk; returns the bytes read (0 at the end of the file). */
  private async readChunk(lines: LogLine[]): Promise<number> {
    const file = this.file!;
    // Sized to what is there: a quiet container's log is looked at every second, and a
    // 1 MiB buffer for each look that finds nothing was most of an idle agent's garbage.
    const { size } = await file.handle.stat();
    if (size <= file.offset) return 0;
    const want = Math.min(READ_CHUNK_BYTES, size - file.offset);
    const buffer = Buffer.allocUnsafe(want);
    const { bytesRead } = await file.handle.read(buffer, 0, want, file.offset);
    if (bytesRead === 0) return 0;
    file.offset += bytesRead;
    const data = this.rest.length > 0 ? Buffer.concat([this.rest, buffer.subarray(0, bytesRead)]) : buffer.subarray(0, bytesRead);
    let start = 0;
    for (let end = data.indexOf(NEWLINE); end !== -1; end = data.indexOf(NEWLINE, start)) {
      this.parseEntry(data.toString("utf8", start, end), lines);
      start = end + 1;
    }
    this.rest = Buffer.from(data.subarray(start));
    return bytesRead;
  }

  /** At the end of the file: moves on to the next file if Docker rotated this one away. */
  private async followRotation(lines: LogLine[]): Promise<boolean> {
    const current = await stat(this.path).catch(() => undefined);
    const file = this.file!;
    if (!current || current.ino === file.ino) return false; // nothing new yet, or the new file is not created yet
    while ((await this.readChunk(lines)) > 0) {} // what Docker wrote before renaming it
    const files = await this.files();
    const at = files.findIndex((f) => f.ino === file.ino);
    if (at < 0) this.logger.warn("The container logged faster than its log was read: lines in deleted log files were lost", { path: this.path });
    const next = files[at + 1];
    await file.handle.close().catch(() => {});
    this.file = undefined;
    if (!next) return false;
    await this.openAt(next, 0);
    return true;
  }

  private parseEntry(text: string, lines: LogLine[]): void {
    let entry: { log?: unknown; stream?: unknown; time?: unknown };
    try {
      entry = JSON.parse(text) as typeof entry;
    } catch {
      return; // not a json-file line
    }
    if (typeof entry.log !== "string" || typeof entry.time !== "string") return;
    const stream: Stream = entry.stream === "stderr" ? "stderr" : "stdout";
    const pending = this.partial[stream];
    if (!entry.log.endsWith("\n")) {
      if (pending) pending.text += entry.log;
      else this.partial[stream] = { ts: entry.time, text: entry.log };
      return;
    }
    let message = entry.log.slice(0, -1);
    if (message.endsWith("\r")) message = message.slice(0, -1);
    let ts = entry.time;
    if (pending) {
      message = pending.text + message;
      ts = pending.ts;
      delete this.partial[stream];
    }
    lines.push({ timestamp: dockerTimestampToIso(ts) ?? new Date().toISOString(), dockerTimestamp: ts, stream, message });
  }
}

/** The "time" of a json-file line without parsing all of it: it is the last field. */
function timeOf(line: string): string {
  const at = line.lastIndexOf('"time":"');
  return at < 0 ? "" : line.slice(at + 8, line.indexOf('"', at + 8));
}

/**
 * The byte offset of the first line after the cursor: after the last line
 * stamped exactly as the cursor (the last piece of a long line shares its
 * stamp), or else at the first line stamped later.
 */
function offsetAfter(content: Buffer, cursorTs: string, cursorNs: bigint): number {
  let exact = -1;
  let firstLater = -1;
  let start = 0;
  for (let end = content.indexOf(NEWLINE); end !== -1; end = content.indexOf(NEWLINE, start)) {
    const ts = timeOf(content.toString("utf8", start, end));
    if (ts === cursorTs) exact = end + 1;
    else if (firstLater < 0 && exact < 0) {
      const ns = dockerTsToNs(ts);
      if (ns !== undefined && ns > cursorNs) firstLater = start;
    }
    start = end + 1;
  }
  if (exact >= 0) return exact;
  return firstLater >= 0 ? firstLater : start;
}
