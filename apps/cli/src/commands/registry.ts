import { REGISTRY_PASSWORD_MAX_LENGTH } from "@cm/protocol";
import { type Run, str, UsageError } from "../args";

/** All of stdin, less the line ending `echo` or a file adds, as `docker login --password-stdin` reads it. */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
    // A password is short; a file piped by mistake is not read whole.
    if (size > REGISTRY_PASSWORD_MAX_LENGTH * 4 + 2) throw new UsageError(`--password-stdin read more than ${REGISTRY_PASSWORD_MAX_LENGTH} characters`);
  }
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

/** Asks on the terminal without echoing what is typed. */
function promptHidden(question: string): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write(question);
  stdin.setRawMode(true);
  stdin.setEncoding("utf8");
  stdin.resume();
  return new Promise((resolve, reject) => {
    let typed = "";
    const done = (end: () => void) => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
      end();
    };
    const onData = (text: string) => {
      for (const ch of text) {
        if (ch === "\r" || ch === "\n") return done(() => resolve(typed));
        if (ch === "\u0003" || ch === "\u0004") return done(() => reject(new UsageError("no password given")));
        if (ch === "\u007f" || ch === "\b") typed = typed.slice(0, -1);
        else typed += ch;
      }
    };
    stdin.on("data", onData);
  });
}

export const add: Run = async (ctx, { args, flags }) => {
  const username = str(flags, "username");
  if (username === undefined) throw new UsageError("give --username");
  let password: string;
  if (flags["password-stdin"] === true) password = await readStdin();
  else if (process.stdin.isTTY) password = await promptHidden(`Password for ${username} at ${args[0]}: `);
  else throw new UsageError("stdin is not a terminal: pass the password on stdin with --password-stdin");
  if (password === "") throw new UsageError("the password is empty");
  const credential = await ctx.client.registryCredentials.create({ registry: args[0]!, username, password });
  if (ctx.json) return ctx.out.json({ credential });
  ctx.out.line(credential.id);
  ctx.out.note(
    `Stored ${credential.id} for ${credential.username} at ${credential.registry}. Use it with: cm deploy --image ${credential.registry}/IMAGE --registry-credential ${credential.id}`,
  );
};

export const list: Run = async (ctx) => {
  const credentials = await ctx.client.registryCredentials.list();
  if (ctx.json) return ctx.out.json({ credentials });
  ctx.out.table(
    ["ID", "REGISTRY", "USERNAME", "CREATED", "LAST USED"],
    credentials.map((c) => [c.id, c.registry, c.username, c.createdAt, c.lastUsedAt ?? "never"]),
  );
  if (credentials.length === 0) ctx.out.note("No registry credentials. Add one with: cm registry add REGISTRY --username U --password-stdin");
};

export const rm: Run = async (ctx, { args }) => {
  const answer = await ctx.client.registryCredentials.remove(args[0]!);
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.note(`Deleted ${args[0]}.`);
};
