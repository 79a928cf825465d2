import { API_KEY_MAX_TTL_S, API_KEY_SCOPES, type ApiKeyScope, DEFAULT_API_KEY_SCOPES } from "@cm/protocol";
import { type Run, str, UsageError } from "../args";

const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** "30d" as seconds; a UsageError for anything else. */
export function durationS(text: string): number {
  const m = /^(\d+)([smhd])$/.exec(text.trim());
  if (!m) throw new UsageError(`--expires takes a number and a unit (s, m, h or d), such as 30d or 12h, not ${JSON.stringify(text)}`);
  const seconds = Number(m[1]) * UNIT_S[m[2]!]!;
  if (seconds < 60 || seconds > API_KEY_MAX_TTL_S) throw new UsageError(`--expires must be between 1 minute and ${API_KEY_MAX_TTL_S / 86_400} days`);
  return seconds;
}

function scopes(text: string | undefined): ApiKeyScope[] {
  if (text === undefined) return [...DEFAULT_API_KEY_SCOPES];
  const named = [...new Set(text.split(",").map((s) => s.trim()))].filter(Boolean);
  const unknown = named.filter((s) => !(API_KEY_SCOPES as readonly string[]).includes(s));
  if (unknown.length || named.length === 0)
    throw new UsageError(`--scope takes a comma-separated list of ${API_KEY_SCOPES.join(", ")}${unknown.length ? `, not ${unknown.join(", ")}` : ""}`);
  return named as ApiKeyScope[];
}

export const create: Run = async (ctx, { flags }) => {
  const name = str(flags, "name");
  if (name === undefined) throw new UsageError("give --name, to know the key by");
  const expires = str(flags, "expires");
  const body = { name, scopes: scopes(str(flags, "scope")), ...(expires === undefined ? {} : { expiresInS: durationS(expires) }) };
  const { apiKey, key } = await ctx.client.auth.apiKeys.create(body);
  if (ctx.json) return ctx.out.json({ apiKey, key });
  // The key alone on stdout, so that CM_API_KEY=$(cm auth keys create ...) works; the rest on stderr.
  ctx.out.line(key);
  ctx.out.note(
    `Created ${apiKey.id} "${apiKey.name}" (${apiKey.scopes.join(", ")}${apiKey.expiresAt ? `, expires ${apiKey.expiresAt}` : ", until deleted"}).\n` +
      "This is the only time the key is shown: store it now (a CI secret, a password manager). Use it with CM_API_KEY=<key> cm ..., or the SDK's createClient({ apiKey }).",
  );
};

export const ls: Run = async (ctx) => {
  const { apiKeys } = await ctx.client.auth.apiKeys.list();
  if (ctx.json) return ctx.out.json({ apiKeys });
  ctx.out.table(
    ["ID", "NAME", "PREFIX", "SCOPES", "CREATED", "LAST USED", "EXPIRES"],
    apiKeys.map((k) => [k.id, k.name, `${k.prefix}…`, k.scopes.join(","), k.createdAt, k.lastUsedAt ?? "never", k.expiresAt ?? "never"]),
  );
  if (apiKeys.length === 0) ctx.out.note("No API keys. Create one with: cm auth keys create --name N --scope read,deploy");
};

export const rm: Run = async (ctx, { args }) => {
  const answer = await ctx.client.auth.apiKeys.remove(args[0]!);
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.note(`Deleted ${args[0]}: it no longer works.`);
};
