/**
 * Polls `fn` until it returns something truthy. On timeout the error names the
 * last error `fn` threw and whatever `explain` says (the state being waited on).
 */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000, explain?: () => Promise<string>): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const state = explain ? await explain().catch((err: unknown) => `(could not say: ${String(err)})`) : "";
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}${state ? `\n${state}` : ""}`);
}
