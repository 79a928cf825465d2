export type SseEvent = { id?: string; event?: string; data?: string };

/** An SSE reader over fetch, as a test needs it: events as they come, comments counted. */
export async function openSse(url: string, token: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, accept: "text/event-stream", ...headers }, signal: controller.signal });
  const events: SseEvent[] = [];
  let comments = 0;
  let ended = false;
  const done = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      const reader = res.body.getReader();
      for (;;) {
        const { value, done: finished } = await reader.read();
        if (finished) break;
        buffer += decoder.decode(value, { stream: true });
        for (let at = buffer.indexOf("\n\n"); at >= 0; at = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          if (block.startsWith(":")) {
            comments++;
            continue;
          }
          const e: SseEvent = {};
          for (const line of block.split("\n")) {
            const [field, ...rest] = line.split(": ");
            (e as Record<string, string>)[field!] = rest.join(": ");
          }
          events.push(e);
        }
      }
    } catch {
      // aborted
    }
    ended = true;
  })();
  return { res, events, comments: () => comments, ended: () => ended, done, close: () => controller.abort() };
}

/** Waits for a condition the stream will meet; the test's own timeout is the real bound. */
export async function until(what: string, check: () => boolean, ms = 10_000) {
  const t0 = Date.now();
  while (!check()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
