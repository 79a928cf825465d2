import net from "node:net";
import type { Logger } from "../logger";
import { tcpPortsOf } from "../runtime/labels";
import type { ContainerState } from "../runtime/types";
import { ReusedBufferReader } from "./reused-buffer-reader";
import { dialTunnel } from "./tunnel-dial";

export type TunnelRequest = { tunnelId: string; deploymentId: string; port: number };
export type TunnelResult = { ok: true } | { ok: false; reason: string };

export type TunnelOptions = {
  /** http(s)://control-plane/agent/tunnel */
  tunnelUrl: string;
  token: string;
  /** this node's running container of a deployment (Reconciler.runningContainer): the only kind a tunnel enters */
  runningContainer(deploymentId: string): Promise<ContainerState | undefined>;
  logger: Logger;
  connectTimeoutMs?: number;
};

/**
 * Carries one public-endpoint connection: a TCP connection to the container's
 * port, spliced to a connection of its own to the control plane. One socket per
 * connection keeps a large transfer from delaying the control connection's
 * heartbeats and commands, and lets TCP's own flow control pace each stream.
 *
 * The agent connects only to the address of a container it runs for the named
 * deployment, on a port that container exposes (its image's or deployment's
 * ports, or its raw TCP ports): never to the host or elsewhere.
 */
export class TunnelOpener {
  private readonly open = new Set<{ close(): void }>();
  constructor(private readonly o: TunnelOptions) {}

  async openTunnel(req: TunnelRequest): Promise<TunnelResult> {
    const c = await this.o.runningContainer(req.deploymentId);
    if (!c || !c.ipAddress) return { ok: false, reason: `deployment ${req.deploymentId} has no running container on this node` };
    if (!c.ports.some((p) => p.containerPort === req.port) && !tcpPortsOf(c.labels).includes(req.port))
      return { ok: false, reason: `port ${req.port} is not exposed by deployment ${req.deploymentId}` };

    // The container's side is read into a buffer reused for every read (the big
    // direction); the tunnel's side comes from an HTTP upgrade, which cannot
    // take one, and is piped.
    const toClient = new ReusedBufferReader();
    const tcp = await this.connect(c.ipAddress, req.port, toClient).catch((err: Error) => err);
    if (tcp instanceof Error) return { ok: false, reason: `nothing answers on port ${req.port} yet (${tcp.message})` };

    const handle = { close: () => tcp.destroy() };
    this.open.add(handle);
    tcp.on("close", () => this.open.delete(handle));
    this.dialControlPlane(req.tunnelId).then(
      (tunnel) => {
        handle.close = () => (tunnel.destroy(), tcp.destroy());
        if (tcp.destroyed) return void tunnel.destroy();
        tunnel.pipe(tcp);
        toClient.forwardTo(tunnel);
        tunnel.on("error", () => tcp.destroy());
        tcp.on("error", () => tunnel.destroy());
        tunnel.on("close", () => tcp.destroy());
        tcp.on("close", () => tunnel.destroy());
      },
      (err: Error) => {
        this.o.logger.warn("tunnel socket failed", { tunnelId: req.tunnelId, error: err.message });
        tcp.destroy();
      },
    );
    return { ok: true };
  }

  /** The tunnel's own connection to the control plane, upgraded to raw bytes. */
  private dialControlPlane(tunnelId: string): Promise<net.Socket> {
    return dialTunnel(this.o.tunnelUrl, this.o.token, tunnelId, this.o.connectTimeoutMs);
  }

  /** Which of the deployment's exposed ports accept a connection now (for the endpoint's `ready`); undefined while it has no running container. */
  async probe(deploymentId: string): Promise<Array<{ port: number; ready: boolean }> | undefined> {
    const c = await this.o.runningContainer(deploymentId);
    if (!c || !c.ipAddress) return undefined; // not running (yet): nothing to say
    // A raw TCP port is no endpoint, even one the image EXPOSEs: reported, it would become one.
    const tcp = tcpPortsOf(c.labels);
    return Promise.all(
      c.ports
        .filter((p) => !tcp.includes(p.containerPort))
        .map(async (p) => {
          const s = await this.connect(c.ipAddress!, p.containerPort).catch(() => undefined);
          s?.destroy();
          return { port: p.containerPort, ready: s !== undefined };
        }),
    );
  }

  private connect(host: string, port: number, reader?: ReusedBufferReader) {
    return new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect({ host, port, ...(reader ? { onread: reader.onread } : {}) });
      reader?.attach(s);
      s.setNoDelay(true);
      const t = setTimeout(() => s.destroy(new Error("connect timed out")), this.o.connectTimeoutMs ?? 5_000);
      s.once("connect", () => {
        clearTimeout(t);
        resolve(s);
      });
      s.once("error", (err) => {
        clearTimeout(t);
        reject(err);
      });
    });
  }

  /** Ends every open tunnel (the agent is shutting down). */
  closeAll() {
    for (const h of this.open) h.close();
    this.open.clear();
  }
}
