import type net from "node:net";

/** Bytes per read: what Node reads at a time anyway. */
const READ_BUFFER_BYTES = 64 * 1024;

/**
 * Carries what one socket reads to another, reading into one buffer of its
 * own instead of the fresh buffer Node allocates for every read. The agent
 * reads a container's side of a tunnel this way (the big direction: downloads,
 * streams). In a bare relay process it saves 16-21% of the CPU per MB, writing
 * into plain TCP or into TLS (bench/read-buffer.ts); in the agent, whose heap
 * is far larger, every fresh buffer also costs garbage collection: there the
 * agent's CPU per MB of a large download fell from ~2,200 us to ~700
 * (bench/endpoints.ts, bench/README.md).
 *
 * The buffer is read into again only once no write holds any of it: a plain
 * socket's write that completes at once has handed every byte to the kernel;
 * otherwise (a write left pending, or any TLS write, which completes later
 * though TLS has already encrypted the bytes into buffers of its own) reading
 * pauses until the write's callback, which is also the backpressure a pipe
 * would apply. Over TLS that is a pause per read, and still cheaper than a
 * fresh buffer per read (bench/read-buffer.ts with TLS=1).
 *
 * Memory: the buffer is the socket's from its creation, so each open tunnel
 * holds 64 KiB even while idle (an idle WebSocket, a quiet event stream):
 * 1,000 open connections through one agent hold ~64 MiB.
 *
 * Use: `net.connect({ ..., onread: reader.onread })`, then `attach()` the
 * socket, then `forwardTo()` once the destination is ready; what arrives
 * before that is copied and sent first. The source's end ends the destination.
 */
export class ReusedBufferReader {
  private readonly buffer: Buffer;
  private source: net.Socket | undefined;
  private dest: net.Socket | undefined;
  /** Read before there was a destination: copies, since the buffer is read into again. */
  private early: Buffer[] = [];
  private ended = false;

  readonly onread: { buffer: Buffer; callback: (n: number) => boolean };

  constructor(bytes = READ_BUFFER_BYTES) {
    this.buffer = Buffer.allocUnsafe(bytes);
    this.onread = {
      buffer: this.buffer,
      callback: (n) => {
        const data = this.buffer.subarray(0, n); // Node read into our own buffer
        if (this.dest) return this.forward(this.dest, data);
        this.early.push(Buffer.from(data));
        return false; // nowhere to send it yet: read on once there is
      },
    };
  }

  attach(source: net.Socket): void {
    this.source = source;
    source.once("end", () => {
      this.ended = true;
      this.dest?.end();
    });
  }

  /** The destination is ready: what came early goes first, then reading goes on. */
  forwardTo(dest: net.Socket): void {
    this.dest = dest;
    for (const chunk of this.early) dest.write(chunk);
    this.early = [];
    if (this.ended) dest.end();
    else this.source?.resume();
  }

  /** Writes a view of the buffer; true when no write holds it any more, so reading may go on. */
  private forward(dest: net.Socket, data: Buffer): boolean {
    let waiting = false;
    // Node calls a write's callback on a later tick, never inside write().
    dest.write(data, () => {
      if (waiting && this.source && !this.source.destroyed) this.source.resume();
    });
    // Nothing left queued after the write: the kernel took all of it at once.
    if (dest.writableLength === 0) return true;
    waiting = true;
    return false;
  }
}
