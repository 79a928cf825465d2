import { type Run, UsageError } from "../args";

/**
 * `cm exec ID [-i] [-t] -- CMD...`, as `docker exec` and `kubectl exec` behave:
 * stdin is passed when piped (or with -i), stdout and stderr stay apart, and
 * cm exits with the command's exit code. With -t the terminal is raw, so every
 * key (Ctrl-C included) goes to the command, and it follows window resizes.
 */
export const exec: Run = async (ctx, { args, flags }) => {
  const [id, ...command] = args as [string, ...string[]];
  if (command.length === 0) throw new UsageError("give the command to run after --, such as: cm exec ID -- sh -c 'echo hi'");
  const tty = flags.tty === true;
  const stdin = process.stdin;
  if (tty && !stdin.isTTY) throw new UsageError("-t needs a terminal on stdin; leave it out when stdin is piped");
  // Only this command needs a WebSocket: the others start without loading it.
  const { WebSocket } = await import("ws");
  const out = process.stdout;
  const session = ctx.client.deployments.exec(id, {
    command,
    tty,
    ...(tty && out.columns && out.rows ? { cols: out.columns, rows: out.rows } : {}),
    // A full pipe (`cm exec ... | slow-reader`) holds the command back rather than this process's memory.
    onStdout: (data) => paced(out, data),
    onStderr: (data) => paced(process.stderr, data),
    WebSocket,
  });

  const passStdin = flags.interactive === true || tty || !stdin.isTTY;
  let over = false;
  // Read stdin only as fast as the command takes it: `cm exec ID -- sh -c 'cat > f' < big` must not load big.
  const onData = (chunk: Buffer) => {
    if (session.write(chunk)) return;
    stdin.pause();
    void session.drained().then(() => over || stdin.resume());
  };
  const onEnd = () => session.end();
  const onResize = () => out.columns && out.rows && session.resize(out.columns, out.rows);
  const onAbort = () => session.close();
  if (passStdin) {
    stdin.on("data", onData);
    stdin.once("end", onEnd);
  } else {
    session.end();
  }
  if (tty) {
    stdin.setRawMode(true);
    out.on("resize", onResize);
  }
  ctx.signal.addEventListener("abort", onAbort);
  try {
    // Exit codes are a byte, as a shell passes them on (-1, "unknown", becomes 255).
    return (await session.exit) & 0xff;
  } catch (err) {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    throw err;
  } finally {
    over = true;
    ctx.signal.removeEventListener("abort", onAbort);
    if (tty) {
      stdin.setRawMode(false);
      out.off("resize", onResize);
    }
    stdin.off("data", onData);
    stdin.off("end", onEnd);
    // The command is over: stop reading stdin so that cm can exit.
    stdin.pause();
    stdin.unref?.();
  }
};

const draining = new WeakMap<NodeJS.WritableStream, Promise<void>>();

/**
 * Writes `data`; when the stream is full, the promise of its drain (or its end:
 * a closed pipe must not hold the session for ever). One promise per full
 * stream, whatever the number of writes that find it full: messages already
 * read still arrive after the pause, and a listener each would pile up.
 */
export function paced(stream: NodeJS.WritableStream, data: Uint8Array): Promise<void> | undefined {
  if (stream.write(data)) return undefined;
  let drained = draining.get(stream);
  if (!drained) {
    drained = new Promise<void>((resolve) => {
      const done = () => {
        stream.off("drain", done);
        stream.off("close", done);
        stream.off("error", done);
        draining.delete(stream);
        resolve();
      };
      stream.on("drain", done);
      stream.on("close", done);
      stream.on("error", done);
    });
    draining.set(stream, drained);
  }
  return drained;
}
