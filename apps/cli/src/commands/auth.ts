import type { Run } from "../args";

export const login: Run = async (ctx) => {
  const signer = await ctx.signer();
  const { user } = await ctx.client.auth.signIn(signer);
  if (ctx.json) return ctx.out.json({ user });
  ctx.out.note(`Signed in to ${ctx.api} as ${user.walletAddress} (${user.id}${user.isOperator ? ", operator" : ""}).`);
};

export const logout: Run = async (ctx) => {
  const had = await ctx.client.auth.session();
  await ctx.client.auth.signOut();
  if (ctx.json) return ctx.out.json({ success: true });
  ctx.out.note(had ? `Signed out of ${ctx.api}.` : `Not signed in to ${ctx.api}.`);
};

export const whoami: Run = async (ctx) => {
  const me = await ctx.client.auth.me();
  if (ctx.json) return ctx.out.json(me);
  ctx.out.fields([
    ["wallet", me.user.walletAddress],
    ["user", me.user.id],
    ["operator", me.user.isOperator ? "yes" : "no"],
    ["since", me.user.createdAt],
    ["api", ctx.api],
  ]);
};

/** The access token alone on stdout, for `curl -H "Authorization: Bearer $(cm token)"`; refreshed first as any command would. */
export const token: Run = async (ctx) => {
  const accessToken = await ctx.client.auth.accessToken();
  if (ctx.json) return ctx.out.json({ accessToken, expiresAt: (await ctx.client.auth.session())?.expiresAt });
  ctx.out.line(accessToken);
};
