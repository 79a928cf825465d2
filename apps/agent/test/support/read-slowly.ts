import type { Readable } from "node:stream";

/**
 * Reads a stream to its end, pausing 5 ms after every `pauseEvery` bytes: a
 * slow reader, so backpressure reaches whoever writes (the agent must hold a
 * container back, never drop or overwrite bytes it has not sent yet).
 */
export function readSlowly(stream: Readable, pauseEvery: number): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let sincePause = 0;
    stream.on("data", (data: Buffer) => {
      chunks.push(data);
      sincePause += data.length;
      if (sincePause >= pauseEvery) {
        sincePause = 0;
        stream.pause();
        setTimeout(() => stream.resume(), 5);
      }
    });
    stream.on("end", () => resolve(Buffer.concat(chunks)));
    stream.on("error", reject);
  });
}
