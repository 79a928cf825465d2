/**
 * A short-lived cache of serialised responses, for public reads that many
 * clients repeat (the node catalogue). Entries live `ttlMs` at most and are
 * dropped at once when this process changes what they show; changes made by
 * another replica show after the TTL.
 */
export class ResponseCache {
  private entries = new Map<string, { body: string; expiresAt: number }>();

  constructor(private readonly o: { ttlMs: number; maxEntries: number; now: () => number }) {}

  get(key: string): string | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= this.o.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e.body;
  }

  set(key: string, body: string) {
    if (this.entries.size >= this.o.maxEntries) this.entries.clear();
    this.entries.set(key, { body, expiresAt: this.o.now() + this.o.ttlMs });
  }

  clear() {
    this.entries.clear();
  }
}
