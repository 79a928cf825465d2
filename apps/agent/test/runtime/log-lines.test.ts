import { describe, expect, it } from "vitest";
import { createFrameDecoder, encodeFrame } from "../../src/runtime/docker-frames";
import { createLogDecoder } from "../../src/runtime/log-decoder";
import { createLineSplitter, dockerTimestampToIso, parseTimestampedLine, toDockerSince } from "../../src/runtime/log-lines";
import type { LogLine } from "../../src/runtime/types";
import { readFixtureBytes } from "../support/fixtures";

// Raw bytes of GET /containers/{id}/logs?stdout=1&stderr=1&timestamps=1 from Docker 20.10.24
// for: echo line 0; echo err 0 >&2; printf "héllo wörld ✓\n"; printf "no newline at end"
const recorded = readFixtureBytes("docker/logs-multiplexed-timestamps.bin");

function decodeInChunks(bytes: Buffer, chunkSize: number): LogLine[] {
  const lines: LogLine[] = [];
  const decoder = createLogDecoder({ multiplexed: true }, (line) => lines.push(line));
  for (let at = 0; at < bytes.length; at += chunkSize) decoder.push(bytes.subarray(at, at + chunkSize));
  decoder.end();
  return lines;
}

describe("createLineSplitter", () => {
  it("joins lines split across chunks and keeps the unterminated rest for flush", () => {
    const splitter = createLineSplitter();
    expect(splitter.push("ab")).toEqual([]);
    expect(splitter.push("c\nde")).toEqual(["abc"]);
    expect(splitter.push("f\r\n\ng")).toEqual(["def", ""]);
    expect(splitter.flush()).toEqual(["g"]);
    expect(splitter.flush()).toEqual([]);
  });
});

describe("Docker timestamps", () => {
  it("keeps Docker's nanoseconds aside and gives an ISO timestamp", () => {
    expect(parseTimestampedLine("2026-11-22T02:12:24.241050831Z line 0", "stdout")).toEqual({
      timestamp: "2026-11-22T02:12:24.241Z",
      dockerTimestamp: "2026-11-22T02:12:24.241050831Z",
      stream: "stdout",
      message: "line 0",
    });
    expect(dockerTimestampToIso("2026-11-22T02:12:24Z")).toBe("2026-11-22T02:12:24.000Z");
    expect(dockerTimestampToIso("2026-11-22T03:12:24.5+01:00")).toBe("2026-11-22T02:12:24.500Z");
    expect(dockerTimestampToIso("not a time")).toBeUndefined();
  });

  it("keeps a line without a timestamp whole, stamped when received", () => {
    const receivedAt = new Date("2026-01-01T00:00:00.000Z");
    expect(parseTimestampedLine("plain text", "stderr", receivedAt)).toEqual({
      timestamp: "2026-01-01T00:00:00.000Z",
      dockerTimestamp: "",
      stream: "stderr",
      message: "plain text",
    });
  });

  it("writes `since` as seconds.nanoseconds", () => {
    expect(toDockerSince(new Date("2026-11-22T02:12:24.241Z"))).toBe("1795313544.241000000");
  });
});

describe("createFrameDecoder", () => {
  it("reassembles frames whose headers and payloads are cut anywhere", () => {
    const bytes = Buffer.concat([encodeFrame("stdout", "out\n"), encodeFrame("stderr", "err\n"), encodeFrame("stdout", "")]);
    const decoder = createFrameDecoder();
    const frames = [...bytes].flatMap((byte) => decoder.push(Buffer.from([byte])));
    expect(frames.map((frame) => [frame.stream, frame.payload.toString()])).toEqual([
      ["stdout", "out\n"],
      ["stderr", "err\n"],
      ["stdout", ""],
    ]);
    expect(decoder.pendingBytes()).toBe(0);
  });

  it("falls back to raw stdout when the stream is not multiplexed", () => {
    const decoder = createFrameDecoder();
    expect(decoder.push(Buffer.from("hello from a tty\n")).map((f) => f.payload.toString())).toEqual(["hello from a tty\n"]);
    expect(decoder.push(Buffer.from("more")).map((f) => f.stream)).toEqual(["stdout"]);
  });
});

describe("createLogDecoder on recorded Docker output", () => {
  const expected = [
    { timestamp: "2026-11-22T02:12:24.241Z", dockerTimestamp: "2026-11-22T02:12:24.241050831Z", stream: "stdout", message: "line 0" },
    { timestamp: "2026-11-22T02:12:24.241Z", dockerTimestamp: "2026-11-22T02:12:24.241152182Z", stream: "stdout", message: "héllo wörld ✓" },
    { timestamp: "2026-11-22T02:12:24.241Z", dockerTimestamp: "2026-11-22T02:12:24.241116108Z", stream: "stderr", message: "err 0" },
    { timestamp: "2026-11-22T02:12:24.272Z", dockerTimestamp: "2026-11-22T02:12:24.272453147Z", stream: "stdout", message: "no newline at end" },
  ];

  it.each([1, 3, 7, 64, 4096])("gives the same lines when fed %i bytes at a time", (chunkSize) => {
    expect(decodeInChunks(recorded, chunkSize)).toEqual(expected);
  });

  it("treats a TTY container's raw output as stdout lines", () => {
    const lines: LogLine[] = [];
    const decoder = createLogDecoder({ multiplexed: false }, (line) => lines.push(line));
    decoder.push(Buffer.from("2026-11-22T02:12:24.241050831Z progress 10%\r\n2026-11-22T02:12:24.3Z pro"));
    decoder.push(Buffer.from("gress 20%\r\n"));
    decoder.end();
    expect(lines.map((line) => [line.stream, line.message])).toEqual([
      ["stdout", "progress 10%"],
      ["stdout", "progress 20%"],
    ]);
  });
});
