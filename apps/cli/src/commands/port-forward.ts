import { spawn, spawnSync } from "node:child_process";
import net from "node:net";
import { constants as osConstants } from "node:os";
import type { TcpConnection } from "@cm/sdk";
import { type Run, UsageError } from "../args";
import type { Context } from "../context";
import { printable } from "../output";
import { paced } from "./exec";

/** The one address cm listens on: a forwarded port is for this machine's programs, never its network's. */
const LOOPBACK = "127.0.0.1";

const portNumber = (text: string, what: string, min = 1) => {
  if (!/^\d{1,5}$/.test(text) || Number(text) < min || Number(text) > 65535)
    throw new UsageError(`${what} is a port number (${min} to 65535), not ${JSON.stringify(text)}`);
  return Number(text);
};

/**
 * `cm port-forward ID LOCAL:REMOTE` listens on 127.0.0.1:LOCAL and carries each
 * connection it accepts to the container's REMOTE port, one WebSocket each (as
 * `kubectl port-forward` does); `--stdio REMOTE` carries stdin and stdout
 * instead, for ssh's ProxyCommand. The route's checks are asked first, so a
 * port the deployment did not declare fails here rather than at each connection.
 */
export const portForward: Run = async (ctx, { args, flags }) => {
  const [id, ports] = args as [string, string];
  const stdio = flags.stdio === true;
  if (stdio && ports.includes(":")) throw new UsageError("with --stdio give the container's port alone: cm port-forward ID --stdio 22");
  if (!stdio && !/^\d+:\d+$/.test(ports))
    throw new UsageError(`give LOCAL:REMOTE, such as 2222:22 (0 as LOCAL picks a free port), not ${JSON.stringify(ports)}`);
  const [local, remote] = stdio ? [undefined, portNumber(ports, "REMOTE")] : ports.split(":").map((p, i) => portNumber(p, i ? "REMOTE" : "LOCAL", i ? 1 : 0));
  await ctx.client.deployments.checkTcp(id, remote!);
  const { WebSocket } = await import("ws");
  const open = (local: Endpoint) => pipe(ctx, ctx.client.deployments.tcp(id, remote!, { onData: (d) => paced(local.out, d), WebSocket }), local);
  if (stdio) return forwardStdio(ctx, open);
  return listen(ctx, local!, remote!, id, open);
};

/** `cm ssh ID [-- ssh args]`: ssh into the container's port 22 (or --port) through cm port-forward --stdio. */
export const ssh: Run = async (ctx, { args, flags }) => {
  const [id, ...sshArgs] = args as [string, ...string[]];
  const port = typeof flags.port === "string" ? portNumber(flags.port, "--port") : 22;
  const user = typeof flags.user === "string" ? flags.user : "root";
  const self = [process.execPath, ...process.execArgv, process.argv[1]!].map(shellQuote).join(" ");
  const globals = [`--api ${shellQuote(ctx.api)}`, `--keypair ${shellQuote(ctx.keypairPath)}`].join(" ");
  const proxy = `${self} ${globals} port-forward ${shellQuote(id)} --stdio ${port}`;
  // The host name is only what ssh shows and keys its known_hosts entry on: the proxy decides where the bytes go.
  const argv = ["-o", `ProxyCommand=${proxy}`, "-o", "ServerAliveInterval=60", "-o", `HostKeyAlias=cm-${id}`, ...sshArgs, `${user}@${id}`];
  if (spawnSync("ssh", ["-V"], { stdio: "ignore" }).error) {
    ctx.out.note("no ssh client here: run this where one is (with cm in the PATH there):");
    ctx.out.line(["ssh", ...argv].map(shellQuote).join(" "));
    return 1;
  }
  // The route's checks first, as port-forward makes them: a port the deployment did not declare fails
  // here with the API's code, not as ssh's "Connection closed by UNKNOWN port 65535".
  await ctx.client.deployments.checkTcp(id, port);
  const child = spawn("ssh", argv, { stdio: "inherit" });
  // Ctrl-C in a terminal reaches ssh itself; a SIGINT sent to cm alone must not leave ssh behind.
  const onAbort = () => child.kill("SIGTERM");
  ctx.signal.addEventListener("abort", onAbort);
  return new Promise<number>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      ctx.signal.removeEventListener("abort", onAbort);
      resolve(code ?? (signal ? 128 + (osConstants.signals[signal] ?? 0) : 1));
    });
  });
};

/** One side of a forwarded connection: where the container's bytes go and where ours come from. */
type Endpoint = {
  out: NodeJS.WritableStream;
  in: NodeJS.ReadableStream;
  /** Whether its closing closes the connection: a socket's does; stdin's end does not, as the answer may still be coming (ssh ends cm itself). */
  closes: boolean;
  done(): void;
};

function listen(ctx: Context, local: number, remote: number, id: string, open: (e: Endpoint) => Promise<number>) {
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on("error", () => socket.destroy());
    // A connection the control plane refuses is told on stderr; the others carry on.
    open({ out: socket, in: socket, closes: true, done: () => socket.destroy() }).catch((err: { code?: string; message?: string }) => {
      if (!ctx.signal.aborted) ctx.out.note(`error ${err.code ?? "INTERNAL"}: ${printable(err.message ?? String(err))}`);
    });
  });
  // Only Ctrl-C ends it (exit 130, as for any interrupted command).
  return new Promise<number>((_resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(Object.assign(new Error(`cannot listen on ${LOOPBACK}:${local}: ${err.message}`), { code: "LISTEN_FAILED" })),
    );
    server.listen(local, LOOPBACK, () => {
      const port = (server.address() as net.AddressInfo).port;
      if (ctx.json) ctx.out.json({ localAddress: LOOPBACK, localPort: port, deploymentId: id, remotePort: remote });
      else ctx.out.line(`Forwarding from ${LOOPBACK}:${port} to ${id} port ${remote}`);
      ctx.out.note("Ctrl-C stops forwarding");
    });
    ctx.signal.addEventListener("abort", () => {
      server.close();
      reject(ctx.signal.reason);
    });
  });
}

async function forwardStdio(ctx: Context, open: (e: Endpoint) => Promise<number>): Promise<number> {
  try {
    return await open({ out: process.stdout, in: process.stdin, closes: false, done: () => process.stdin.pause() });
  } catch (err) {
    throw ctx.signal.aborted ? ctx.signal.reason : err;
  } finally {
    // The connection is over: stop reading stdin so that cm can exit.
    process.stdin.unref?.();
  }
}

/**
 * Carries bytes both ways until either side ends: the local side's close closes
 * the connection, and the container's closing ends the local side. Reads of the
 * local side wait while the connection is behind. 0 when the container closed
 * it (or we did), 1 when the control plane ended it (said on stderr); throws
 * the refusal of a connection that never opened.
 */
async function pipe(ctx: Context, conn: TcpConnection, local: Endpoint): Promise<number> {
  const onAbort = () => conn.close();
  ctx.signal.addEventListener("abort", onAbort);
  const onData = (chunk: Buffer) => {
    if (conn.write(chunk)) return;
    local.in.pause();
    void conn.drained().then(() => local.in.resume());
  };
  local.in.on("data", onData);
  const onClose = () => conn.close();
  if (local.closes) local.in.once("close", onClose);
  try {
    await conn.opened;
    const { code, reason } = await conn.closed;
    if (code === 1000 || code === 1005 || ctx.signal.aborted) return 0;
    ctx.out.note(`connection ended (${code}${reason ? `: ${printable(reason)}` : ""})`);
    return 1;
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
    local.in.off("data", onData);
    local.in.off("close", onClose);
    local.done();
  }
}

/** One word for a POSIX shell (ssh runs the ProxyCommand with one). */
function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
