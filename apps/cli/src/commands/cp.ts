import fs from "node:fs";
import path from "node:path";
import { ApiError, CmError, type ExecSession } from "@cm/sdk";
import { type Run, UsageError } from "../args";
import type { Context } from "../context";
import { type PackSummary, pack } from "./tar";
import { Extractor } from "./tar-extract";

/**
 * `cm cp LOCAL ID:PATH` and `cm cp ID:PATH LOCAL`, as `docker cp` behaves:
 * files and directories travel as a tar stream. Into a running container over
 * the exec session, through the container's own tar (busybox has one), so
 * nothing is installed on the node. Out of a container, running or not, through
 * the files route, which the node's engine answers with the container's archive
 * as docker cp's own: a stopped, exited or failed deployment's results come out
 * too, and no tar or shell is needed in the image. Container paths are taken
 * from the container's / when relative, as docker cp takes them. "-" as LOCAL
 * is a tar stream on stdin or stdout.
 */
export const cp: Run = async (ctx, { args }) => {
  const [from, to] = args as [string, string];
  const src = side(from);
  const dest = side(to);
  if (src.remote && dest.remote) throw new UsageError("copy between this machine and a container: give one local path and one ID:PATH");
  if (!src.remote && !dest.remote) throw new UsageError("one of the two must be a deployment's path, ID:PATH, such as dep_7f3a9c:/workspace");
  if (dest.remote) await upload(ctx, src.path, dest.id, dest.path);
  else if (src.remote) await download(ctx, src.id, src.path, dest.path);
};

type Side = { remote: true; id: string; path: string } | { remote: false; path: string };

/** ID:PATH names a container's path; anything else (./a:b, /x) is local, as docker cp tells them apart. */
function side(arg: string): Side {
  const m = /^([A-Za-z0-9_-]+):(.*)$/s.exec(arg);
  if (!m) return { remote: false, path: arg };
  if (m[2] === "") throw new UsageError(`${arg}: give the container's path after the colon, such as ${m[1]}:/workspace`);
  // Relative to /: docker cp's rule. A trailing "/." (the directory's contents) is kept apart from normalising.
  const contents = /\/\.$/.test(m[2]!) || m[2] === ".";
  const resolved = path.posix.resolve("/", m[2]!);
  return { remote: true, id: m[1]!, path: contents && resolved !== "/" ? `${resolved}/.` : resolved };
}

/** Exit codes the scripts below use for what cm must say in words. */
const NO_TAR = 100;
const NO_SUCH_PATH = 101;

const noTar = () =>
  new CmError(
    "NO_TAR",
    "the container has no tar: cm cp runs the container's tar (busybox and most distribution images have one); install it, or use cm exec with cat",
  );

/** The engine's answer when the program itself is missing (no sh in a distroless image). */
const missingProgram = (code: number, stderr: string, stdout: string) =>
  code === 126 || code === 127 ? new CmError("NO_SHELL", `the container cannot run sh and tar, which cm cp needs: ${firstLine(stdout || stderr)}`) : undefined;

const firstLine = (text: string) => text.trim().split("\n")[0]?.slice(0, 500) ?? "";

/** Runs one command in the container: what it printed on stderr (the first 64 KiB), its exit code. */
async function run(
  ctx: Context,
  id: string,
  command: string[],
  o: { onStdout?: (data: Uint8Array) => unknown; feed?: (session: ExecSession) => Promise<void> } = {},
): Promise<{ code: number; stderr: string }> {
  const { WebSocket } = await import("ws");
  let stderr = "";
  const session = ctx.client.deployments.exec(id, {
    command,
    onStdout: o.onStdout,
    onStderr: (data) => {
      if (stderr.length < 64 * 1024) stderr += Buffer.from(data).toString("utf8");
    },
    WebSocket,
  });
  const onAbort = () => session.close();
  ctx.signal.addEventListener("abort", onAbort);
  try {
    if (!o.feed) session.end();
    const fed = o.feed?.(session);
    const [code] = await Promise.all([session.exit, fed]);
    return { code, stderr };
  } catch (err) {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    throw notRunning(err, id);
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
  }
}

/** The exec route's refusal of a deployment that is not running, in cm cp's words: only a copy in needs it. */
function notRunning(err: unknown, id: string): unknown {
  if (!(err instanceof ApiError) || err.code !== "INVALID_STATE_TRANSITION") return err;
  const status = (err.details as { currentStatus?: string } | undefined)?.currentStatus ?? "not running";
  return new CmError(
    "DEPLOYMENT_NOT_RUNNING",
    `deployment ${id} is ${status}: cm cp copies into a running deployment only; start it first (cm start ${id}). Copying out works in any state while its container is kept`,
  );
}

// What is at the container's path: dir, file, none (its directory exists) or noparent. $1 the path, $2 its directory.
const PROBE = `command -v tar >/dev/null 2>&1 || exit ${NO_TAR}
if [ -d "$1" ]; then echo dir; elif [ -e "$1" ] || [ -L "$1" ]; then echo file; elif [ -d "$2" ]; then echo none; else echo noparent; fi`;

async function upload(ctx: Context, local: string, id: string, remote: string) {
  const fromStdin = local === "-";
  const st = fromStdin ? undefined : fs.statSync(local, { throwIfNoEntry: false });
  if (!fromStdin && !st) throw new CmError("NO_SUCH_PATH", `no such file or directory here: ${local}`);
  const contents = remote.endsWith("/.");
  const target = contents ? remote.slice(0, -2) || "/" : remote;
  const probe = await capture(ctx, id, ["sh", "-c", PROBE, "cm-cp", target, path.posix.dirname(target)]);
  const where = probe.stdout.trim();
  if (probe.code === NO_TAR) throw noTar();
  if (probe.code !== 0) throw missingProgram(probe.code, probe.stderr, probe.stdout) ?? failed(probe.code, probe.stderr);
  if (where === "noparent") throw new CmError("NO_SUCH_PATH", `no such directory in the container: ${path.posix.dirname(target)}`);
  if (where !== "dir" && (remote.endsWith("/") || contents)) throw new CmError("NO_SUCH_PATH", `no such directory in the container: ${target}`);
  if (fromStdin && where !== "dir")
    throw new CmError("NO_SUCH_PATH", `a tar stream from stdin goes into a directory, and ${target} is not one in the container`);
  if (where === "file" && st?.isDirectory()) throw new CmError("NOT_A_DIRECTORY", `cannot copy directory ${local} onto ${target}, a file in the container`);

  // Into an existing directory under its own name ("." with /.: its contents), else as the path named.
  const localContents = /(^|[\\/])\.$/.test(local);
  const into = where === "dir" ? target : path.posix.dirname(target);
  const top = where === "dir" ? (localContents ? "." : path.basename(path.resolve(local)) || ".") : path.posix.basename(target);
  const summary: PackSummary = { files: 0, symlinks: 0, bytes: 0, skipped: [] };
  let over = false;
  // Through sh, as the probe found tar: a busybox image may have the applet without a /bin/tar for exec to find.
  const r = await run(ctx, id, ["sh", "-c", 'exec tar -x -f - -C "$1"', "cm-cp", into], {
    feed: async (session) => {
      void session.exit.finally(() => (over = true)).catch(() => undefined);
      const pieces = fromStdin ? (process.stdin as AsyncIterable<Buffer>) : pack(local, top, summary);
      try {
        for await (const piece of pieces) {
          if (over) break;
          if (!session.write(piece)) await session.drained();
        }
      } catch (err) {
        // Half an archive must not be left for the container's tar to wait on.
        session.close();
        throw new CmError("COPY_FAILED", `could not read ${local}: ${(err as Error).message}`);
      }
      session.end();
    },
  });
  if (r.code !== 0) throw missingProgram(r.code, r.stderr, "") ?? failed(r.code, r.stderr);
  for (const skipped of summary.skipped) process.stderr.write(`cm cp: left out ${skipped}: not a file, directory or link\n`);
  if (ctx.json) ctx.out.json({ copied: { files: summary.files, bytes: summary.bytes } });
  else if (fromStdin) ctx.out.note(`copied the tar stream on stdin into ${id}:${into}`);
  else ctx.out.note(`copied ${amount(summary)} from ${local} to ${id}:${top === "." ? into : path.posix.join(into, top)}`);
}

/** What a copy carried, for the person at the terminal (as cp -v and rsync --stats say it, on stderr). */
const amount = ({ files, symlinks, bytes }: { files: number; symlinks: number; bytes: number }) =>
  [
    `${files} file${files === 1 ? "" : "s"}`,
    ...(symlinks ? [`${symlinks} link${symlinks === 1 ? "" : "s"}`] : []),
    `${bytes} byte${bytes === 1 ? "" : "s"}`,
  ].join(", ");

async function download(ctx: Context, id: string, remote: string, local: string) {
  const contents = remote.endsWith("/.") || remote === "/";
  const name = contents ? "." : path.posix.basename(remote);
  const toStdout = local === "-";
  let extractor: Extractor | undefined;
  let landed = local;
  if (!toStdout) {
    // lstat: a link here (one a copy before this one made, say) is not followed to where it points.
    const st = fs.lstatSync(local, { throwIfNoEntry: false });
    if (st?.isSymbolicLink())
      throw new CmError(
        "DESTINATION_IS_A_LINK",
        `${local} is a symbolic link (to ${fs.readlinkSync(local)}): cm cp never writes through a link; name the directory itself, or remove the link`,
      );
    if (!st && /[\\/]$/.test(local)) throw new CmError("NO_SUCH_PATH", `no such directory here: ${local}`);
    const parent = path.dirname(path.resolve(local));
    if (!st && !fs.statSync(parent, { throwIfNoEntry: false })?.isDirectory()) throw new CmError("NO_SUCH_PATH", `no such directory here: ${parent}`);
    // Into an existing directory under its own name (or, for "/.", its contents), else as the path named.
    // The root is the directory the tenant named, as it is; everything the archive makes below it is checked.
    const root = fs.realpathSync(st?.isDirectory() ? local : parent);
    const top = st?.isDirectory() ? name : path.basename(path.resolve(local));
    if (st?.isDirectory() && top !== ".") landed = path.join(local, top);
    const onFile = st !== undefined && !st.isDirectory();
    const rename = (entry: string) =>
      name === "." ? path.posix.join(top, entry) : entry === name ? top : entry.startsWith(`${name}/`) ? `${top}/${entry.slice(name.length + 1)}` : undefined;
    extractor = new Extractor(root, rename, (type) => {
      if (type === "dir" && onFile) throw new CmError("NOT_A_DIRECTORY", `cannot copy directory ${remote} onto ${local}, a file here`);
    });
  }
  const shown = remote === "/" ? "/" : remote.replace(/\/\.$/, "");
  const sink = (chunk: Buffer) => (extractor ? extractor.push(chunk) : writeOut(chunk));
  // A running container through its own tar over exec: the engine's archive API holds the container while it reads
  // (an exec into it, and a second copy, wait until the read ends). Any other through the files route.
  const { deployment } = await ctx.client.deployments.get(id);
  const throughExec = deployment.status === "running" && (await viaExec(ctx, id, remote, name, shown, sink));
  if (!throughExec) await viaFiles(ctx, id, remote, shown, sink);
  if (!extractor) {
    ctx.out.note(`copied ${id}:${remote} to stdout, as a tar stream`);
    return;
  }
  extractor.end();
  for (const skipped of extractor.skipped) process.stderr.write(`cm cp: left out ${skipped}\n`);
  if (ctx.json) ctx.out.json({ copied: { files: extractor.files, bytes: extractor.bytes } });
  else ctx.out.note(`copied ${amount(extractor)} from ${id}:${remote} to ${landed}`);
}

/** Copies out through the files route, running or not; the engine's archive names its top entry as tar -C DIR NAME would. */
async function viaFiles(ctx: Context, id: string, remote: string, shown: string, sink: (chunk: Buffer) => unknown) {
  const archive = await ctx.client.deployments.files(id, remote === "/" ? "/." : remote, { signal: ctx.signal }).catch((err: unknown) => {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    if (err instanceof ApiError && err.code === "PATH_NOT_FOUND") throw new CmError("NO_SUCH_PATH", `no such file or directory in the container: ${shown}`);
    throw err;
  });
  let writing = false;
  try {
    for await (const data of archive as unknown as AsyncIterable<Uint8Array>) {
      writing = true;
      await sink(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      writing = false;
    }
  } catch (err) {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    if (err instanceof CmError) throw err;
    if (writing) throw new CmError("COPY_FAILED", `could not write the copy here: ${(err as Error).message}`);
    throw new CmError("COPY_FAILED", `the copy of ${id}:${shown} was cut off before its end (${(err as Error).message}): copy it again`);
  }
}

// Archives $2 from within directory $1 on stdout.
const FETCH = `command -v tar >/dev/null 2>&1 || exit ${NO_TAR}
cd "$1" 2>/dev/null && { [ -e "$2" ] || [ -L "$2" ]; } || exit ${NO_SUCH_PATH}
exec tar -c -f - "$2"`;

/** Copies out of a running container through its tar; false when it stopped meanwhile (the files route then reads it). */
async function viaExec(ctx: Context, id: string, remote: string, name: string, shown: string, sink: (chunk: Buffer) => unknown): Promise<boolean> {
  const contents = remote.endsWith("/.") || remote === "/";
  const dir = contents ? remote.replace(/\/\.$/, "") || "/" : path.posix.dirname(remote);
  let failure: unknown;
  let session: ExecSession | undefined;
  const r = await run(ctx, id, ["sh", "-c", FETCH, "cm-cp", dir, name], {
    onStdout: (data) => {
      if (failure) return;
      try {
        return sink(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      } catch (err) {
        failure = err;
        session?.close();
      }
    },
    feed: async (s) => {
      session = s;
      s.end();
    },
  }).catch((err: unknown) => {
    if (failure) return { code: -1, stderr: "" };
    if (err instanceof CmError && err.code === "DEPLOYMENT_NOT_RUNNING") return undefined;
    throw err;
  });
  if (failure) throw failure instanceof CmError ? failure : new CmError("COPY_FAILED", `could not write the copy here: ${(failure as Error).message}`);
  if (!r) return false;
  if (r.code === NO_TAR) throw noTar();
  if (r.code === NO_SUCH_PATH) throw new CmError("NO_SUCH_PATH", `no such file or directory in the container: ${shown}`);
  if (r.code !== 0) throw missingProgram(r.code, r.stderr, "") ?? failed(r.code, r.stderr);
  return true;
}

/** Stdout as a pipe: a full one holds the container's tar back rather than this process's memory. */
function writeOut(chunk: Buffer): Promise<void> | undefined {
  if (process.stdout.write(chunk)) return undefined;
  return new Promise((resolve) => process.stdout.once("drain", resolve));
}

/** A command of the copy that exited with an error: its own words. */
const failed = (code: number, stderr: string) =>
  new CmError("COPY_FAILED", `the container's tar failed (exit ${code})${stderr.trim() ? `: ${stderr.trim().slice(0, 2000)}` : ""}`);

/** A short command whose stdout is read whole. */
async function capture(ctx: Context, id: string, command: string[]) {
  let stdout = "";
  const r = await run(ctx, id, command, {
    onStdout: (data) => {
      if (stdout.length < 64 * 1024) stdout += Buffer.from(data).toString("utf8");
    },
  });
  return { ...r, stdout };
}
