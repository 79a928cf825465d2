// Docker multiplexes stdout and stderr of non-TTY containers into one stream of
// frames: an 8-byte header [stream, 0, 0, 0, size (uint32 big-endian)] and then
// `size` bytes of payload. Network chunks cut frames anywhere, headers included.

export type OutputStream = "stdout" | "stderr";

export interface Frame {
  stream: OutputStream;
  payload: Buffer;
}

const HEADER_BYTES = 8;
const STREAM_BY_TYPE: Readonly<Record<number, OutputStream>> = { 0: "stdout", 1: "stdout", 2: "stderr" };

export interface FrameDecoder {
  /** Frames completed by this chunk, in order. */
  push(chunk: Buffer): Frame[];
  /** Bytes of a frame the stream ended in the middle of (0 after a clean end). */
  pendingBytes(): number;
}

/**
 * A header with an unknown stream byte means the stream is not multiplexed
 * after all (a TTY container): from then on everything is passed on as stdout.
 */
export function createFrameDecoder(): FrameDecoder {
  let buffered: Buffer = Buffer.alloc(0);
  let raw = false;

  return {
    push(chunk) {
      if (raw) return chunk.length > 0 ? [{ stream: "stdout", payload: chunk }] : [];
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const frames: Frame[] = [];
      while (buffered.length >= HEADER_BYTES) {
        const stream = STREAM_BY_TYPE[buffered.readUInt8(0)];
        if (!stream) {
          raw = true;
          frames.push({ stream: "stdout", payload: buffered });
          buffered = Buffer.alloc(0);
          break;
        }
        const size = buffered.readUInt32BE(4);
        if (buffered.length < HEADER_BYTES + size) break;
        frames.push({ stream, payload: buffered.subarray(HEADER_BYTES, HEADER_BYTES + size) });
        buffered = buffered.subarray(HEADER_BYTES + size);
      }
      return frames;
    },
    pendingBytes: () => buffered.length,
  };
}

/** Builds a frame as Docker would; for tests and fakes. */
export function encodeFrame(stream: OutputStream, payload: string | Buffer): Buffer {
  const body = typeof payload === "string" ? Buffer.from(payload) : payload;
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt8(stream === "stdout" ? 1 : 2, 0);
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}
