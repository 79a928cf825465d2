/** One Server-Sent Event as the WHATWG parser builds it; `id` is the stream's last event id after this block. */
export type SseEvent = { event: string; data: string; id: string | undefined };

/**
 * Reads a text/event-stream body block by block. Comments are skipped; a block
 * with an `id:` and no data still moves the last event id (the server's way to
 * hand a cursor before any line), and is yielded with event "" so a reader can keep it.
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let id: string | undefined;
  let event = "";
  let data: string[] = [];
  let sawId = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let end = lineEnd(buffer); end.at >= 0; end = lineEnd(buffer)) {
        const line = buffer.slice(0, end.at);
        buffer = buffer.slice(end.at + end.length);
        if (line === "") {
          if (data.length > 0) yield { event: event || "message", data: data.join("\n"), id };
          else if (sawId) yield { event: "", data: "", id };
          event = "";
          data = [];
          sawId = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") data.push(value);
        else if (field === "event") event = value;
        else if (field === "id" && !value.includes("\u0000")) {
          id = value;
          sawId = true;
        }
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}

function lineEnd(s: string): { at: number; length: number } {
  const lf = s.indexOf("\n");
  const cr = s.indexOf("\r");
  if (cr >= 0 && (lf < 0 || cr < lf)) {
    // A lone \r at the end may be the first half of \r\n: wait for more.
    if (cr === s.length - 1) return { at: -1, length: 0 };
    return { at: cr, length: s[cr + 1] === "\n" ? 2 : 1 };
  }
  return { at: lf, length: 1 };
}
