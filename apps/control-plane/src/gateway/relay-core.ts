import type net from "node:net";
import type { Duplex } from "node:stream";
import { lingeringClose } from "../http/lingering-close";
import type { GatewayAnswers } from "./answers";
import { failureBytes } from "./forwarding";
import { endpointLabel } from "./headers";
import { type BodyWalker, type Client, type Framing, headEnd, MAX_HEAD_BYTES, type RequestHead, requestFraming } from "./http1";
import type { GatewayFailure } from "./pages";
import type { EndpointResolver, EndpointTarget, GatewayTimeouts, TunnelDialer } from "./ports";

export type RelayOptions = {
  domain: string;
  resolver: EndpointResolver;
  dialer: TunnelDialer;
  timeouts: Required<GatewayTimeouts>;
  secure: boolean;
  /** Where each answer sent to a visitor is counted. */
  answers: GatewayAnswers;
  /** Takes the connection back, its unread bytes put back first, to be routed afresh. */
  reroute(socket: net.Socket): void;
};

/**
 * A request sent on to the container whose response has not ended yet. A
 * bodyless one keeps its forwarded head, `alone` when nothing was outstanding
 * on the tunnel as it went, for the one retry (forwarding.ts's mayResend).
 */
export type Outstanding = { method: string; upgrade: boolean; close: boolean; sent: boolean; head: string | undefined; alone: boolean; resent: boolean };

/** The host a request names, when it names exactly one. */
export function hostOf(h: RequestHead): string | undefined {
  return h.hosts.length === 1 ? h.hosts[0] : undefined;
}

/**
 * The endpoint label of a request the relay can carry, with its body framing:
 * HTTP/1.1 with one Host and a framing beyond doubt. HTTP/1.0 goes to Node's
 * HTTP server, which knows how to answer it (no chunked bodies, keep-alive
 * only when asked), rather than the relay learning it too.
 */
export function relayable(h: RequestHead | undefined, domain: string): { label: string; framing: Framing } | undefined {
  if (!h || h.version !== "1.1") return undefined;
  const framing = requestFraming(h);
  const label = framing && endpointLabel(hostOf(h), domain);
  return label ? { label, framing: framing! } : undefined;
}

/**
 * The state of a relayed connection and what ends it: flow control, timers,
 * the failure page, the hand-off to the router. The request and response flow
 * over it is the Relay's (relay.ts).
 */
export abstract class RelayCore {
  protected buf: Buffer | undefined;
  protected body: BodyWalker | undefined;
  protected tunnel: Duplex | undefined;
  protected reply: Buffer | undefined;
  protected replyBody: BodyWalker | undefined;
  protected readonly queue: Outstanding[] = [];
  /** The request whose body is being forwarded (its response may even have come already). */
  protected sending: Outstanding | undefined;
  /** The client asked to close after its last request: nothing after it is read. */
  protected lastRequest = false;
  protected dialing = false;
  protected handingOff = false;
  protected waitingUpgrade = false;
  protected tunnelFull = false;
  /** The container said it closes the tunnel after the present response: nothing more is sent on it. */
  protected tunnelLast = false;
  protected raw = false;
  protected closing = false;
  protected clientEnded = false;
  protected detached = false;
  /** No request outstanding: the socket's timeout is the keep-alive one. */
  protected betweenRequests = false;
  /** Responses completed on the present tunnel: a tunnel that served one is a reused one. */
  protected served = 0;
  protected timer: NodeJS.Timeout | undefined;
  protected headTimer: NodeJS.Timeout | undefined;
  protected readonly client: Client;
  /** What the router looked up for the first request: the first dial needs no second look. */
  protected target: EndpointTarget | undefined;

  constructor(
    protected readonly socket: net.Socket,
    protected readonly label: string,
    protected readonly o: RelayOptions,
  ) {
    this.client = { ip: socket.remoteAddress ?? "", proto: o.secure ? "https" : "http", host: "" };
  }

  /** Leaves the connection to the router: the Relay's listeners come off. */
  protected abstract detach(): void;

  /** Nothing outstanding: no response awaited, no body being sent, no tunnel being dialed, not upgraded. */
  protected idle() {
    return this.queue.length === 0 && !this.body && !this.raw && !this.dialing;
  }

  /** Whether to read more from the client now. */
  protected flow() {
    if (this.detached || this.closing) return; // the connection is someone else's now, or lingering to its close
    // Bytes held back (behind a dial, a closing tunnel, an upgrade) stop the reading
    // at a head's worth: a client cannot make the gateway buffer without bound.
    const held = !this.raw && this.buf !== undefined && this.buf.length > MAX_HEAD_BYTES;
    const read = !this.dialing && !this.handingOff && !this.waitingUpgrade && !this.tunnelFull && !this.closing && !held;
    if (read) this.socket.resume();
    else this.socket.pause();
  }

  // Heads are strings of latin1 bytes (http1.ts reads them so): written back as
  // latin1, a header value's raw UTF-8 or other obs-text bytes pass unchanged.
  protected toTunnel(data: Buffer | string) {
    if (!this.tunnel) return; // gone: whoever closed it has already decided what the client gets
    if (!this.tunnel.write(data, "latin1") && !this.tunnelFull) {
      this.tunnelFull = true;
      this.flow();
      this.tunnel!.once("drain", () => {
        this.tunnelFull = false;
        this.flow();
      });
    }
  }

  protected toClient(data: Buffer | string) {
    if (!this.socket.write(data, "latin1") && this.tunnel && !this.tunnel.isPaused()) {
      const t = this.tunnel;
      t.pause();
      this.socket.once("drain", () => t.resume());
    }
  }

  protected armTimer() {
    if (this.timer || this.replyBody || !this.queue[0]?.sent || this.raw) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.fail("timeout", `no response within ${this.o.timeouts.responseMs / 1000} s`);
    }, this.o.timeouts.responseMs);
  }

  protected clearTimer() {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  protected clearHeadTimer() {
    if (this.headTimer) clearTimeout(this.headTimer);
    this.headTimer = undefined;
  }

  protected readonly onSlowHead = () => {
    this.headTimer = undefined;
    if (this.queue.length > 0 || this.closing || this.detached) return;
    this.socket.write("HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    this.finish();
  };

  /** Stops here and routes the connection afresh, once every earlier response has gone out. */
  protected handOff() {
    this.handingOff = true;
    this.flow();
    this.finishIfIdle();
  }

  /** Acts on what was waiting for the last outstanding response. */
  protected finishIfIdle() {
    if (!this.idle()) return;
    if (this.handingOff) {
      // Bytes cannot be put back on a stream that has ended: the request after
      // a half-close stays unanswered, the connection closed as the client asked.
      if (this.clientEnded) return this.finish();
      this.detach();
      if (this.buf) this.socket.unshift(this.buf);
      this.buf = undefined;
      return this.o.reroute(this.socket);
    }
    // A whole request read before the client's end is still answered (the pump after a response sends it).
    if (this.clientEnded && !(this.buf && headEnd(this.buf) >= 0)) this.finish();
  }

  /** The client's connection ends after what was written; the tunnel goes. */
  protected finish() {
    this.closing = true;
    this.tunnel?.destroy();
    // A client still sending (a body nobody will read, bytes not looked at) is
    // read from and its bytes dropped, within bounds, so that the answer is not
    // lost to a reset. Otherwise, as Node's HTTP server allows half-open sockets:
    // once what was written is out, the socket goes, whether or not the client
    // ever ends its side.
    if (this.body || this.buf) return lingeringClose(this.socket);
    this.socket.pause();
    this.socket.end(() => this.socket.destroy());
  }

  /** A page saying why, when no byte of the present response went out yet; else a cut connection. */
  protected fail(kind: GatewayFailure, detail?: string) {
    if (this.replyBody || this.raw) return this.abort();
    const page = failureBytes(kind, detail);
    this.o.answers.add("gateway", page.status);
    this.socket.write(page.bytes);
    this.queue.length = 0;
    this.finish();
  }

  protected badGateway(detail: string) {
    this.fail("port_not_ready", detail);
  }

  protected abort() {
    this.socket.destroy();
    this.tunnel?.destroy();
  }
}
