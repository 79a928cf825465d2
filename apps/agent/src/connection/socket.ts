// The socket is injected so tests (and the doctor) can shape it; production uses `ws`.
import { AGENT_MAX_INBOUND_FRAME_BYTES } from "@cm/protocol";
import WebSocket from "ws";

export type AgentSocket = WebSocket;
export type SocketFactory = (url: string) => AgentSocket;

export interface WsSocketOptions {
  /** the TCP + TLS + HTTP upgrade must finish within this */
  handshakeTimeoutMs?: number;
}

export function wsSocketFactory(options: WsSocketOptions = {}): SocketFactory {
  return (url) =>
    new WebSocket(url, {
      handshakeTimeout: options.handshakeTimeoutMs ?? 10_000,
      // The control plane sends nothing bigger (the hello says so); a huge frame is a bug or an attack.
      maxPayload: AGENT_MAX_INBOUND_FRAME_BYTES,
      perMessageDeflate: false,
    });
}
