// A node's agent holds one session, on one replica; a tenant's request may reach
// any replica. What needs the session (a public endpoint's bytes, a file read, a
// shell, a TCP connection) is carried to the replica that holds it:
//   - tunnels (endpoints, file reads): the asking replica opens a connection to
//     the holder's internal route, which opens the tunnel through its agent and
//     splices the two; the asking replica's gateway uses it as its own tunnel,
//     so the request's parsing, retries and pages stay where they were;
//   - a tenant's shell or TCP connection (a WebSocket upgrade): the upgrade
//     request itself is replayed to the holder, whose API authenticates it as
//     its own and counts it against the deployment's limits, fleet-wide.
// One hop at most: the holder never carries a hop further.
//
// The holders are in the database (agent_sessions): each replica claims a node
// when its agent's session becomes the node's and releases it when it ends; a
// replica killed outright leaves its rows, which the agent's next session
// elsewhere overwrites. Hops need REPLICA_ADDRESS (where the others reach this
// replica) and REPLICA_SECRET (the same on all, proving a hop is a replica's).
import { timingSafeEqual } from "node:crypto";
import http, { type IncomingMessage } from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import type { Repos } from "@cm/db";
import type { ArchiveErrorCode } from "@cm/protocol";
import { DialError, type EndpointTarget } from "../gateway/ports";
import { asSocketLike } from "../gateway/socket-like";
import type { Clock } from "../services/ids";
import type { Logger } from "../services/logger";
import { ArchiveError, type ArchiveTarget } from "./tunnel-broker";

/** The internal route a replica opens tunnels on for the others. */
export const REPLICA_TUNNEL_PATH = "/internal/replica-tunnel";
const HOP_UPGRADE = "cm-replica-tunnel";
/** Set on a replayed upgrade: the holder must not carry it further. */
export const HOP_HEADER = "x-cm-replica-hop";
/** How long a holder's address is remembered: every tunnel of a busy endpoint would otherwise read it. */
const HOLDER_CACHE_MS = 1_000;

type LocalTunnels = { dial(target: EndpointTarget): Promise<Duplex>; readArchive(target: ArchiveTarget): Promise<Duplex> };

export type ReplicaHopOptions = {
  repos: Repos;
  clock: Clock;
  log: Logger;
  replicaId: string;
  /** REPLICA_ADDRESS: http://host:port the other replicas reach this one at; unset: this replica takes no hops. */
  address?: string | undefined;
  /** REPLICA_SECRET */
  secret?: string | undefined;
  /** How long to wait for the holder to answer a hop. */
  openTimeoutMs: number;
};

/** What a holder answers a tunnel hop it could not open: the error the asking replica raises, as the holder's broker raised it. */
type HopRefusal = { kind: "dial"; code: DialError["kind"]; message: string } | { kind: "archive"; code: ArchiveErrorCode; message: string };

export class ReplicaHop {
  private readonly holders = new Map<string, { address: string | undefined; at: number }>();
  private local: LocalTunnels | undefined;

  constructor(private readonly o: ReplicaHopOptions) {}

  /** Whether this replica can carry requests to others and take theirs. */
  get enabled(): boolean {
    return Boolean(this.o.address && this.o.secret);
  }

  /** The broker that opens tunnels through this replica's own agents: what a hop from another replica uses. */
  setLocal(local: LocalTunnels) {
    this.local = local;
  }

  claim(nodeId: string): Promise<void> {
    return this.o.repos.agentSessions.claim({ nodeId, replicaId: this.o.replicaId, address: this.o.address ?? null, since: this.o.clock.now() });
  }

  release(nodeId: string): Promise<void> {
    return this.o.repos.agentSessions.release(nodeId, this.o.replicaId);
  }

  /** Whether the database says another replica holds the node's session (it judges the node's silence first: silence-watch.ts). */
  async heldElsewhere(nodeId: string): Promise<boolean> {
    const row = await this.o.repos.agentSessions.holder(nodeId);
    return row !== undefined && row.replicaId !== this.o.replicaId;
  }

  releaseAll(): Promise<void> {
    return this.o.repos.agentSessions.releaseAll(this.o.replicaId);
  }

  /** The address of another replica holding the node's session; undefined when none does (as far as the database says) or hops are off. */
  async holderOf(nodeId: string): Promise<string | undefined> {
    if (!this.enabled) return undefined;
    const now = this.o.clock.now();
    const hit = this.holders.get(nodeId);
    if (hit && now - hit.at < HOLDER_CACHE_MS) return hit.address;
    const row = await this.o.repos.agentSessions.holder(nodeId);
    const address = row && row.replicaId !== this.o.replicaId && row.address ? row.address : undefined;
    if (this.holders.size > 10_000) this.holders.clear();
    this.holders.set(nodeId, { address, at: now });
    return address;
  }

  /** A tunnel to a container's port through the replica at `address`. */
  dial(address: string, target: EndpointTarget): Promise<Duplex> {
    return this.open(address, { kind: "port", nodeId: target.nodeId, deploymentId: target.deploymentId, port: String(target.port) });
  }

  /** A container's path as a tar archive through the replica at `address`. */
  readArchive(address: string, target: ArchiveTarget): Promise<Duplex> {
    return this.open(address, { kind: "archive", nodeId: target.nodeId, deploymentId: target.deploymentId, path: target.path });
  }

  private open(address: string, params: Record<string, string>): Promise<Duplex> {
    const url = new URL(`${REPLICA_TUNNEL_PATH}?${new URLSearchParams(params)}`, address);
    return new Promise<Duplex>((resolve, reject) => {
      const req = http.request(url, {
        headers: { connection: "Upgrade", upgrade: HOP_UPGRADE, authorization: `Replica ${this.o.secret}` },
        timeout: this.o.openTimeoutMs,
      });
      req.on("timeout", () => req.destroy(new Error(`no answer within ${this.o.openTimeoutMs / 1000} s`)));
      req.on("error", (err) => reject(new DialError("node_unreachable", `the replica holding the node's session (${address}) did not answer: ${err.message}`)));
      req.on("upgrade", (_res, socket, head) => {
        socket.setNoDelay(true);
        socket.setTimeout(0);
        if (head.length) socket.unshift(head);
        resolve(asSocketLike(socket));
      });
      req.on("response", (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          if (body.length < 4096) body += c;
        });
        res.on("end", () => reject(refusalError(body, res.statusCode)));
        res.on("error", () => reject(refusalError("", res.statusCode)));
      });
      req.end();
    });
  }

  /** `GET /internal/replica-tunnel` from another replica: open the tunnel through our agent and splice it to the caller. */
  handleTunnel = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    void this.takeTunnel(req, socket, head).catch((err) => {
      this.o.log.warn("replicas: a tunnel hop failed", { err });
      socket.destroy();
    });
  };

  private async takeTunnel(req: IncomingMessage, socket: Duplex, head: Buffer) {
    if (!this.enabled || !this.local || !this.fromReplica(req.headers.authorization)) return void refuse(socket, 403, undefined);
    const q = new URL(req.url ?? "/", "http://x").searchParams;
    const nodeId = q.get("nodeId") ?? "";
    const deploymentId = q.get("deploymentId") ?? "";
    let tunnel: Duplex;
    try {
      tunnel =
        q.get("kind") === "archive"
          ? await this.local.readArchive({ nodeId, deploymentId, path: q.get("path") ?? "" })
          : await this.local.dial({ nodeId, deploymentId, port: Number(q.get("port")) });
    } catch (err) {
      if (err instanceof ArchiveError) return void refuse(socket, 502, { kind: "archive", code: err.code, message: err.message });
      if (err instanceof DialError) return void refuse(socket, 502, { kind: "dial", code: err.kind, message: err.message });
      throw err;
    }
    (socket as net.Socket).setNoDelay?.(true);
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${HOP_UPGRADE}\r\n\r\n`);
    if (head.length) tunnel.write(head);
    splice(socket, tunnel);
  }

  /** Replays a tenant's upgrade (a shell, a TCP connection) to the replica at `address`, then carries its bytes both ways. */
  forwardUpgrade(address: string, req: IncomingMessage, socket: Duplex, head: Buffer) {
    const to = new URL(address);
    const upstream = net.connect({ host: to.hostname, port: Number(to.port || 80) });
    upstream.setNoDelay(true);
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      if (req.rawHeaders[i]!.toLowerCase() === HOP_HEADER) continue;
      lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
    }
    lines.push(`${HOP_HEADER}: ${this.o.replicaId}`);
    upstream.once("connect", () => {
      upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
      if (head.length) upstream.write(head);
      splice(socket, upstream);
    });
    upstream.once("error", () => {
      if (!socket.destroyed) refuse(socket, 502, undefined);
    });
  }

  private fromReplica(authorization: string | undefined): boolean {
    const given = Buffer.from(/^Replica (.+)$/.exec(authorization ?? "")?.[1] ?? "");
    const want = Buffer.from(this.o.secret ?? "");
    return want.length > 0 && given.length === want.length && timingSafeEqual(given, want);
  }
}

/** Pure: the error a hop's refusal stands for on the asking replica. */
export function refusalError(body: string, status: number | undefined): Error {
  try {
    const r = JSON.parse(body) as HopRefusal;
    if (r.kind === "archive") return new ArchiveError(r.code, r.message);
    if (r.kind === "dial") return new DialError(r.code, r.message);
  } catch {
    // not one of ours
  }
  return new DialError("node_unreachable", `the replica holding the node's session refused the hop (HTTP ${status ?? "?"})`);
}

function refuse(socket: Duplex, status: number, refusal: HopRefusal | undefined) {
  const body = refusal ? JSON.stringify(refusal) : "";
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** Both ways, each end closing the other. */
function splice(a: Duplex, b: Duplex) {
  a.pipe(b);
  b.pipe(a);
  const close = () => {
    a.destroy();
    b.destroy();
  };
  a.once("close", close);
  b.once("close", close);
  a.on("error", close);
  b.on("error", close);
}

/**
 * Tunnels to any node of the fleet: through this replica's own agent session
 * when it holds the node's, else through the replica that does, else as the
 * local broker answers a node nobody holds (node_unreachable).
 */
export function fleetTunnels(local: LocalTunnels, hop: ReplicaHop | undefined, holdsHere: (nodeId: string) => boolean): LocalTunnels {
  const via = async (nodeId: string) => (hop && !holdsHere(nodeId) ? hop.holderOf(nodeId) : undefined);
  return {
    async dial(target) {
      const address = await via(target.nodeId);
      return address ? hop!.dial(address, target) : local.dial(target);
    },
    async readArchive(target) {
      const address = await via(target.nodeId);
      return address ? hop!.readArchive(address, target) : local.readArchive(target);
    },
  };
}

/** Whether the node's agent is connected to this replica or, as the database says, to another that takes hops. */
export async function reachable(nodeId: string, holdsHere: (nodeId: string) => boolean, hop: ReplicaHop | undefined): Promise<boolean> {
  return holdsHere(nodeId) || (hop !== undefined && (await hop.holderOf(nodeId)) !== undefined);
}
