// Frames from the control plane, parsed against the protocol; never throws.
import { parseFrame, ServerFrame } from "@cm/protocol";
import type { RawData } from "ws";

export type Incoming = { ok: true; frame: ServerFrame } | { ok: false; error: string };

export function parseIncoming(data: RawData, isBinary: boolean): Incoming {
  if (isBinary) return { ok: false, error: "binary frames are not part of the protocol" };
  return parseFrame(ServerFrame, rawToText(data));
}

function rawToText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString("utf8");
  if (Array.isArray(data)) return Buffer.concat(data).toString("utf8");
  return Buffer.from(data).toString("utf8");
}
