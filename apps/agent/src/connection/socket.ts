// The socket is injected so tests (and the doctor) can shape it; production uses `ws`.
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
      // Frames from the control plane are small; a huge one is a bug or an attack.
      maxPayload: 16 * 1024 * 1024,
      perMessageDeflate: false,
    });
}
