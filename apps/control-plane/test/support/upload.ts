import net from "node:net";

/**
 * Sends a request head and then `bodyBytes` of body (Infinity: until the
 * server closes) in 64 KiB pieces, one every `paceMs` (0: as fast as the
 * connection takes them; a client across a network is slower than loopback),
 * reading whatever comes back. Answers what was read, whether the socket
 * failed (EPIPE, ECONNRESET) and how many body bytes were written before it
 * ended.
 */
export function upload(port: number, head: string, bodyBytes: number, paceMs = 0) {
  return new Promise<{ reply: string; error: string | undefined; written: number }>((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    let reply = "";
    let error: string | undefined;
    let written = 0;
    const chunk = Buffer.alloc(64 * 1024, 120);
    s.on("data", (d) => (reply += d.toString("latin1")));
    s.on("error", (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    s.on("close", () => resolve({ reply, error, written }));
    const pump = () => {
      while (written < bodyBytes && !s.destroyed) {
        const n = Math.min(chunk.length, bodyBytes - written);
        written += n;
        const more = s.write(n === chunk.length ? chunk : chunk.subarray(0, n));
        if (paceMs > 0) return void setTimeout(pump, paceMs);
        if (!more) return void s.once("drain", pump);
      }
    };
    s.on("connect", () => {
      s.write(head);
      pump();
    });
  });
}
