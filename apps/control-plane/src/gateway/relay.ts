import type net from "node:net";
import type { Duplex } from "node:stream";
import { failureOf, mayResend, openTunnel } from "./forwarding";
import {
  BodyWalker,
  closesAfter,
  forwardRequestHead,
  forwardResponseHead,
  headEnd,
  MAX_HEAD_BYTES,
  parseRequestHead,
  parseResponseHead,
  responseFraming,
} from "./http1";
import type { EndpointTarget } from "./ports";
import { hostOf, type Outstanding, RelayCore, type RelayOptions, relayable } from "./relay-core";

/**
 * Carries one client connection to one endpoint as bytes, parsing only what a
 * proxy must: request heads (to rewrite them and to see where the next one
 * starts) and response heads (the same, and to know when each response ends).
 * Bodies pass through untouched, in the chunks they came in. This replaces, per
 * request, Node's HTTP server parse, an HTTP client request and a second parse
 * of the response: the gateway's CPU per request falls to near that of a bare
 * byte relay (bench/endpoints.ts).
 *
 * The connection keeps one tunnel at a time, dialed when a request needs it;
 * a tunnel the container closed between requests (or said it would close) is
 * dialed again for the next, the endpoint looked up again first, so a
 * connection kept alive across a stop gets the stopped page, never an old
 * target. A request this relay does not take on (another host, the API, a
 * head it finds ambiguous) waits until every earlier response has gone out,
 * then the connection is routed afresh from that request on.
 *
 * Between requests a connection is kept for `keepAliveMs` (as Node's HTTP
 * server does), then closed with its tunnel; during one, `idleMs` without a
 * byte either way ends it.
 */
export class Relay extends RelayCore {
  constructor(socket: net.Socket, first: Buffer, label: string, target: EndpointTarget, o: RelayOptions) {
    super(socket, label, o);
    this.buf = first;
    this.target = target;
    socket.setNoDelay(true);
    socket.setTimeout(o.timeouts.idleMs);
    socket.on("data", this.onClientData);
    socket.on("end", this.onClientEnd);
    socket.on("close", this.onClientClose);
    socket.on("error", this.onClientError);
    socket.on("timeout", this.onIdle);
    this.pump();
  }

  private readonly onClientData = (chunk: Buffer) => {
    this.buf = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
    const t = this.tunnel;
    t?.cork();
    this.pump();
    t?.uncork();
  };
  private readonly onClientEnd = () => {
    this.clientEnded = true;
    if (this.raw) this.tunnel?.end();
    else if (this.body)
      this.abort(); // a request cut short can get no answer
    else this.finishIfIdle();
  };
  private readonly onClientClose = () => {
    this.clearTimer();
    this.clearHeadTimer();
    const t = this.tunnel;
    this.tunnel = undefined;
    t?.destroy();
  };
  private readonly onClientError = () => this.socket.destroy();
  /** Quiet for too long: between requests that is the end of keep-alive, during one an abandoned request. */
  private readonly onIdle = () => (this.idle() ? this.finish() : this.abort());

  /** Forwards what the client sent, request by request. */
  private pump() {
    while (this.buf && this.buf.length > 0 && !this.dialing && !this.handingOff && !this.closing && !this.detached) {
      if (this.raw) {
        this.toTunnel(this.buf);
        this.buf = undefined;
        break;
      }
      if (this.body) {
        let step: { bytes: number; done: boolean };
        try {
          step = this.body.take(this.buf);
        } catch {
          return this.abort();
        }
        this.toTunnel(this.buf.subarray(0, step.bytes));
        this.rest(step.bytes);
        if (step.done) {
          this.body = undefined;
          this.sending!.sent = true;
          this.sending = undefined;
          this.armTimer();
        }
        continue;
      }
      if (this.lastRequest) {
        this.buf = undefined;
        break;
      }
      if (this.waitingUpgrade) break;
      const end = headEnd(this.buf);
      if (end < 0) {
        if (this.buf.length > MAX_HEAD_BYTES) this.handOff();
        // A head that takes too long to arrive is cut, however it trickles in (as Node's headersTimeout).
        else if (this.queue.length === 0) this.headTimer ??= setTimeout(this.onSlowHead, this.o.timeouts.headersMs);
        break;
      }
      this.clearHeadTimer();
      const head = parseRequestHead(this.buf, end);
      const r = relayable(head, this.o.domain);
      if (!head || !r || r.label !== this.label) {
        this.handOff();
        break;
      }
      const framing = r.framing;
      // A request has come: the keep-alive wait is over, even if the request must wait for a tunnel.
      if (this.betweenRequests) (this.betweenRequests = false), this.socket.setTimeout(this.o.timeouts.idleMs);
      if (!this.tunnel || this.tunnelLast) {
        // Being replaced (a retry) or about to close: wait for it. Else dial one.
        if (this.queue.length === 0 && !this.tunnel) this.dial();
        break;
      }
      const upgrade = head.connection.includes("upgrade") ? head.upgrade : undefined;
      const close = closesAfter(head);
      const out = forwardRequestHead(head, { ...this.client, host: hostOf(head)! }, upgrade);
      const bodyless = framing.kind === "none";
      const req: Outstanding = {
        method: head.method,
        upgrade: upgrade !== undefined,
        close,
        sent: bodyless,
        head: bodyless ? out : undefined,
        alone: this.queue.length === 0,
        resent: false,
      };
      this.queue.push(req);
      this.toTunnel(out);
      this.rest(end);
      if (!bodyless) (this.body = new BodyWalker(framing)), (this.sending = req);
      else this.armTimer();
      if (upgrade !== undefined) this.waitingUpgrade = true;
      this.lastRequest = close;
    }
    this.flow();
  }

  private rest(from: number) {
    this.buf = from < this.buf!.length ? this.buf!.subarray(from) : undefined;
  }

  private dial(resend?: string) {
    this.dialing = true;
    this.flow();
    const known = this.target;
    this.target = undefined;
    openTunnel(this.o, this.label, known).then(
      (t) => {
        this.dialing = false;
        if (this.socket.destroyed) return void t.destroy();
        this.attach(t);
        if (resend) {
          this.toTunnel(resend);
          this.armTimer();
        }
        this.pump();
      },
      (err: Error) => {
        this.dialing = false;
        if (this.socket.destroyed) return;
        const f = failureOf(err);
        this.fail(f.kind, f.detail);
      },
    );
  }

  private attach(t: Duplex) {
    this.tunnel = t;
    this.tunnelLast = false;
    this.served = 0;
    this.reply = undefined;
    t.on("data", (chunk: Buffer) => this.onTunnelData(t, chunk));
    t.on("error", () => t.destroy());
    t.on("close", () => this.onTunnelClose(t));
  }

  private onTunnelData(t: Duplex, chunk: Buffer) {
    if (t !== this.tunnel) return;
    if (this.raw) return this.toClient(chunk);
    this.reply = this.reply ? Buffer.concat([this.reply, chunk]) : chunk;
    // A rewritten head and the body bytes after it leave in one write.
    this.socket.cork();
    try {
      this.readReplies();
    } catch {
      this.abort();
    }
    // A response may have unblocked requests already read: a refused upgrade, a tunnel to replace.
    if (this.buf) this.pump();
    this.socket.uncork();
  }

  /** Sends on what the container answered, response by response. */
  private readReplies() {
    while (this.reply && this.reply.length > 0 && this.tunnel) {
      if (!this.replyBody) {
        const end = headEnd(this.reply);
        if (end < 0) {
          if (this.reply.length > 4 * MAX_HEAD_BYTES) return this.badGateway("the container's response head is too large");
          return;
        }
        const head = parseResponseHead(this.reply, end);
        const req = this.queue[0];
        if (!head || !req) return this.badGateway(head ? "the container answered a request nobody sent" : "the container's response could not be read");
        if (head.status < 100) return this.badGateway(`the container answered with status ${head.status}`);
        this.clearTimer();
        const rest = this.reply.subarray(end);
        this.reply = rest.length ? rest : undefined;
        if (head.status === 101) {
          if (!req.upgrade) return this.badGateway("the container switched protocols unasked");
          this.o.answers.add("container", 101);
          this.toClient(forwardResponseHead(head, { close: false, upgrade: true }));
          this.raw = true;
          this.waitingUpgrade = false;
          this.socket.setTimeout(this.o.timeouts.idleMs);
          if (this.reply) this.toClient(this.reply);
          this.reply = undefined;
          this.pump(); // bytes the client sent after its request, before the switch
          if (this.clientEnded) this.tunnel?.end(); // the client hung up its side while waiting
          return;
        }
        if (head.status < 200) {
          this.toClient(forwardResponseHead(head, { close: false, upgrade: false }));
          this.armTimer();
          continue;
        }
        const framing = responseFraming(head, req.method);
        if (!framing) return this.badGateway("the container's response has an unreadable length");
        this.o.answers.add("container", head.status);
        if (framing.kind === "until-close") req.close = true;
        // The container closes this tunnel after this response (an HTTP/1.0 server
        // often does): the next request gets a new one. Requests already sent on
        // it, or a body still on its way, are lost with it, so the client is told
        // to close and send them again.
        if (closesAfter(head)) {
          this.tunnelLast = true;
          if (this.queue.length > 1 || this.body) req.close = true;
        }
        this.toClient(forwardResponseHead(head, { close: req.close, upgrade: false }));
        this.replyBody = new BodyWalker(framing);
        if (req.upgrade) {
          // Refused: the connection goes on as HTTP.
          req.upgrade = false;
          this.waitingUpgrade = false;
          this.flow();
        }
        if (framing.kind !== "none") continue;
      }
      if (this.reply) {
        const step = this.replyBody.take(this.reply);
        this.toClient(this.reply.subarray(0, step.bytes));
        this.reply = step.bytes < this.reply.length ? this.reply.subarray(step.bytes) : undefined;
        if (!step.done) continue;
      } else if (!this.replyBody.done) return;
      this.replyBody = undefined;
      this.served++;
      const req = this.queue.shift()!;
      if (req.close) return this.finish();
      if (this.tunnelLast) {
        const t = this.tunnel!;
        this.tunnel = undefined;
        this.tunnelLast = this.tunnelFull = false;
        t.destroy();
      }
      if (this.queue.length === 0) (this.betweenRequests = true), this.socket.setTimeout(this.o.timeouts.keepAliveMs);
      this.armTimer();
      this.finishIfIdle();
    }
  }

  private onTunnelClose(t: Duplex) {
    if (t !== this.tunnel || this.socket.destroyed) return;
    this.tunnel = undefined;
    this.tunnelFull = false;
    this.clearTimer();
    if (this.raw) return this.finish();
    if (this.replyBody) {
      // A body that runs until the connection closes has just ended; any other was cut short.
      if (this.replyBody.untilClose) return this.finish();
      return void this.socket.destroy();
    }
    const req = this.queue[0];
    // Closed between requests: the next one dials again. Closed after answering
    // a request whose body is still coming: that body has nowhere to go.
    if (!req) return this.body ? this.finish() : this.flow();
    const again = mayResend({
      method: req.method,
      bodyless: req.head !== undefined,
      reusedTunnel: this.served > 0,
      aloneOnTunnel: req.alone && this.queue.length === 1 && !this.body,
      firstTry: !req.resent,
    });
    if (again) {
      req.resent = true;
      return this.dial(req.head);
    }
    this.fail("port_not_ready", "the container closed the connection without answering");
  }

  protected override detach() {
    this.detached = true;
    this.clearTimer();
    this.clearHeadTimer();
    this.tunnel?.destroy();
    this.tunnel = undefined;
    this.socket.off("data", this.onClientData);
    this.socket.off("end", this.onClientEnd);
    this.socket.off("close", this.onClientClose);
    this.socket.off("error", this.onClientError);
    this.socket.off("timeout", this.onIdle);
    this.socket.setTimeout(0);
    this.socket.pause();
  }
}
