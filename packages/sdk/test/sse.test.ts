import { describe, expect, it } from "vitest";
import { readSse } from "../src/sse";

const body = (...chunks: string[]) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(new TextEncoder().encode(c));
      controller.close();
    },
  });
const all = async (stream: ReadableStream<Uint8Array>) => {
  const out = [];
  for await (const e of readSse(stream)) out.push(e);
  return out;
};

describe("readSse", () => {
  it("reads events split anywhere across chunks, with CRLF, comments and multi-line data", async () => {
    const events = await all(body(": hello\r\n\r\nid: 7\r\nda", 'ta: {"a":1}\r', "\n\r\nevent: end\ndata: x\ndata: y\n\n"));
    expect(events).toEqual([
      { event: "message", data: '{"a":1}', id: "7" },
      { event: "end", data: "x\ny", id: "7" },
    ]);
  });

  it("hands over an id-only block as a cursor", async () => {
    expect(await all(body("id: 42\n\n"))).toEqual([{ event: "", data: "", id: "42" }]);
  });

  it("drops a block cut off by the end of the stream", async () => {
    expect(await all(body("id: 1\ndata: whole\n\nid: 2\ndata: half"))).toEqual([{ event: "message", data: "whole", id: "1" }]);
  });
});
