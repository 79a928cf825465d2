// Turns the raw bytes of `docker logs` into LogLines: demultiplex, decode UTF-8
// per stream (a character may straddle two frames), split lines per stream (a
// line may straddle frames too), then read each line's timestamp. No I/O.
import { StringDecoder } from "node:string_decoder";
import type { OutputStream } from "./docker-frames";
import { createFrameDecoder } from "./docker-frames";
import type { LineSplitter } from "./log-lines";
import { createLineSplitter, parseTimestampedLine } from "./log-lines";
import type { LogLine } from "./types";

export interface LogDecoder {
  push(chunk: Buffer): void;
  /** Emits the unterminated last line of each stream; call once when the stream ends. */
  end(): void;
}

export interface LogDecoderOptions {
  /** false for TTY containers, whose output is one raw stream (reported as stdout) */
  multiplexed: boolean;
  now?: () => Date;
}

export function createLogDecoder(options: LogDecoderOptions, onLine: (line: LogLine) => void): LogDecoder {
  const frames = createFrameDecoder();
  const now = options.now ?? (() => new Date());
  const perStream = new Map<OutputStream, { text: StringDecoder; lines: LineSplitter }>();

  const emit = (stream: OutputStream, lines: string[]) => {
    for (const line of lines) onLine(parseTimestampedLine(line, stream, now));
  };
  const streamState = (stream: OutputStream) => {
    let state = perStream.get(stream);
    if (!state) {
      state = { text: new StringDecoder("utf8"), lines: createLineSplitter() };
      perStream.set(stream, state);
    }
    return state;
  };
  const feed = (stream: OutputStream, payload: Buffer) => {
    const state = streamState(stream);
    emit(stream, state.lines.push(state.text.write(payload)));
  };

  return {
    push(chunk) {
      if (!options.multiplexed) return feed("stdout", chunk);
      for (const frame of frames.push(chunk)) feed(frame.stream, frame.payload);
    },
    end() {
      for (const [stream, state] of perStream) {
        emit(stream, [...state.lines.push(state.text.end()), ...state.lines.flush()]);
      }
    },
  };
}
