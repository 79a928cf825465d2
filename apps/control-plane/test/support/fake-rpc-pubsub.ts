import { createServer } from "node:http";
import type { TransactionError } from "@solana/web3.js";
import bs58 from "bs58";
import { type WebSocket, WebSocketServer } from "ws";
import type { FakeFault } from "./fake-rpc-faults";

/**
 * The node's pubsub WebSocket (the RPC port + 1, where web3.js looks for it), for
 * signature subscriptions only: JSON-RPC 2.0 `signatureSubscribe` answers a
 * subscription id, then once the transaction reaches the commitment asked for one
 * `signatureNotification` goes out and the subscription ends by itself, as on a real node.
 * A fault planned for a method (fake-rpc-faults.ts) answers in its stead.
 */

export type Commitment = "processed" | "confirmed" | "finalized";
export interface SignatureState {
  slot: number;
  err: TransactionError | null;
  commitment: Commitment;
}

export interface FakePubsub {
  /** Tells subscribers of `signature` what it reached (call when a transaction lands or its commitment rises). */
  check(signature: string): void;
  listen(port: number): Promise<void>;
  stop(): Promise<void>;
}

interface Subscription {
  socket: WebSocket;
  signature: string;
  commitment: Commitment;
  receivedNotice: boolean;
  /** A "lost-answer" fault: acknowledged, never notified. */
  silent: boolean;
}

const RANK: Record<Commitment, number> = { processed: 0, confirmed: 1, finalized: 2 };
// A node notifies when a bank at the commitment is next published, a slot after the subscription at the soonest.
const SLOT_MS = 20;

export function createFakePubsub(
  state: (signature: string) => SignatureState | undefined,
  record: (method: string, params: unknown[]) => void,
  fault: (method: string) => FakeFault | undefined,
): FakePubsub {
  const subscriptions = new Map<number, Subscription>();
  const timers = new Set<NodeJS.Timeout>();
  let nextId = 0;
  const server = createServer((_req, res) => res.writeHead(405).end("Used HTTP Method is not allowed. POST or OPTIONS is required"));
  const wss = new WebSocketServer({ server });
  // ws re-emits the server's errors on itself: a port taken (listen() rejects and the
  // caller tries another pair) would otherwise be an uncaught exception.
  wss.on("error", () => {});
  wss.on("connection", (socket) => {
    socket.on("message", (raw) => answer(socket, String(raw)));
    socket.on("close", () => {
      for (const [id, s] of subscriptions) if (s.socket === socket) subscriptions.delete(id);
    });
  });

  const send = (socket: WebSocket, payload: unknown): void => {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(payload));
  };
  function answer(socket: WebSocket, raw: string): void {
    let request: { id?: unknown; method?: unknown; params?: unknown[] };
    try {
      request = JSON.parse(raw);
    } catch {
      send(socket, { jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null });
      return;
    }
    const { id, method, params = [] } = request;
    record(String(method), params);
    // A notification (no id) gets no answer: web3.js sends "ping" that way to keep the socket open.
    if (id === undefined) return;
    const reply = (body: { result: unknown } | { error: { code: number; message: string } }) => send(socket, { jsonrpc: "2.0", ...body, id });
    const planned = fault(String(method));
    if (planned?.kind === "no-answer") return;
    if (planned?.kind === "error") {
      reply({ error: planned.error });
      return;
    }
    if (method === "signatureSubscribe") {
      const [signature, config] = params as [unknown, { commitment?: Commitment; enableReceivedNotification?: boolean } | undefined];
      if (typeof signature !== "string" || bs58.decodeUnsafe(signature)?.length !== 64) {
        reply({ error: { code: -32602, message: "Invalid param: Invalid" } });
        return;
      }
      const subscriptionId = nextId++;
      subscriptions.set(subscriptionId, {
        socket,
        signature,
        commitment: config?.commitment ?? "finalized",
        receivedNotice: config?.enableReceivedNotification === true,
        silent: planned?.kind === "lost-answer",
      });
      reply({ result: subscriptionId });
      later(() => check(signature));
      return;
    }
    if (method === "signatureUnsubscribe") {
      const existed = subscriptions.delete(Number(params[0]));
      reply(existed ? { result: true } : { error: { code: -32602, message: "Invalid subscription id." } });
      return;
    }
    reply({ error: { code: -32601, message: "Method not found" } });
  }

  function later(fn: () => void) {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, SLOT_MS);
    timers.add(timer);
  }

  function check(signature: string): void {
    const landed = state(signature);
    if (!landed) return;
    for (const [subscription, s] of subscriptions) {
      if (s.signature !== signature || s.silent) continue;
      const notify = (value: unknown) =>
        send(s.socket, { jsonrpc: "2.0", method: "signatureNotification", params: { result: { context: { slot: landed.slot }, value }, subscription } });
      if (s.receivedNotice) {
        notify("receivedSignature");
        s.receivedNotice = false;
      }
      if (RANK[landed.commitment] < RANK[s.commitment]) continue;
      notify({ err: landed.err });
      subscriptions.delete(subscription);
    }
  }

  return {
    check: (signature) => later(() => check(signature)),
    listen: (port) =>
      new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => {
          server.off("error", reject);
          resolve();
        });
      }),
    stop: () =>
      new Promise((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        for (const socket of wss.clients) socket.terminate();
        subscriptions.clear();
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
