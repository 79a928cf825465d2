// Where the node's Docker may pull from for a tenant. The egress policy covers
// containers, not the daemon: an image named 127.0.0.1:PORT/x made the node's
// Docker connect to a loopback service with the tenant's login and hand its
// error body back, and a registry whose token challenge names a loopback or
// link-local realm made the daemon fetch it (on a cloud host, the metadata
// service's credentials) and relay the answer. Before a pull, the registry's
// host, and the realm its /v2/ challenge names, must resolve to public
// addresses that are not the node's own, unless the operator allows the
// registry by name (AGENT_REGISTRY_ALLOW: a local registry is a real need).
//
// What this cannot see: a name that resolves differently for the daemon a
// moment later (DNS rebinding), a challenge served differently to Docker, or a
// blob redirect. Those need the daemon's pulls to go through a proxy that
// checks each connection; the operator's firewall for the host itself is the
// other half.
import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { DOCKER_HUB_REGISTRY, imageRegistry, normalizeRegistry } from "@cm/protocol";
import { BLOCKED_IPV4, BLOCKED_IPV6 } from "./policy";

/** The outside world the guard asks: DNS, the registry's challenge, the node's own addresses. */
export interface RegistryProbe {
  /** every address the name resolves to; rejects when it does not */
  lookup(host: string): Promise<string[]>;
  /** the WWW-Authenticate header of GET <registry>/v2/, or undefined when the registry does not answer */
  challenge(registry: string): Promise<string | undefined>;
  ownAddresses(): string[];
}

export class RegistryRefusedError extends Error {
  override readonly name = "RegistryRefusedError";
}

const blocked = new BlockList();
for (const range of BLOCKED_IPV4) {
  const [net, bits] = range.split("/");
  blocked.addSubnet(net!, Number(bits), "ipv4");
}
// node's BlockList matches every IPv4 address against ::ffff:0:0/96: mapped addresses are read as IPv4 below instead.
for (const range of BLOCKED_IPV6.filter((r) => r !== "::ffff:0:0/96")) {
  const [net, bits] = range.split("/");
  blocked.addSubnet(net!, Number(bits), "ipv6");
}

/** Loopback, private, shared, link-local, multicast or reserved, or one of the node's own: not for a tenant's pull. */
export function forbiddenAddress(address: string, own: readonly string[]): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped) return forbiddenAddress(mapped, own);
  return blocked.check(address, family === 4 ? "ipv4" : "ipv6") || own.includes(address);
}

/** The realm URL of a Bearer challenge (`Bearer realm="https://auth.example/token",service="..."`). */
export function bearerRealm(header: string | undefined): string | undefined {
  if (!header || !/^\s*bearer\b/i.test(header)) return undefined;
  return /\brealm\s*=\s*"([^"]*)"/i.exec(header)?.[1] ?? /\brealm\s*=\s*([^,\s]+)/i.exec(header)?.[1];
}

/** host[:port] of a registry, as AGENT_REGISTRY_ALLOW lists them and image references name them. */
function hostOf(registry: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(registry);
  if (bracketed) return bracketed[1]!;
  return registry.replace(/:\d+$/, "");
}

export class RegistryGuard {
  private readonly allowed: Set<string>;

  constructor(
    private readonly probe: RegistryProbe,
    /** AGENT_REGISTRY_ALLOW: registries (host[:port]) tenants may pull from whatever their address */
    allow: readonly string[] = [],
  ) {
    this.allowed = new Set(allow.map(normalizeRegistry));
  }

  /** Resolves when the node may pull `image` for a tenant; rejects with RegistryRefusedError saying why. */
  async check(image: string): Promise<void> {
    const registry = imageRegistry(image);
    if (this.allowed.has(registry)) {
      await this.checkRealm(registry);
      return;
    }
    await this.checkHost(registry, `the image's registry ${registry}`);
    await this.checkRealm(registry);
  }

  private async checkRealm(registry: string): Promise<void> {
    const realm = bearerRealm(await this.probe.challenge(registry === DOCKER_HUB_REGISTRY ? "registry-1.docker.io" : registry));
    if (realm === undefined) return;
    let url: URL;
    try {
      url = new URL(realm);
    } catch {
      throw new RegistryRefusedError(`the registry ${registry} names a token service that is not a URL; the node does not pull from it`);
    }
    if (this.allowed.has(normalizeRegistry(url.host))) return;
    await this.checkHost(url.host, `the token service ${url.host} that the registry ${registry} names`);
  }

  private async checkHost(registry: string, what: string): Promise<void> {
    const host = hostOf(registry === DOCKER_HUB_REGISTRY ? "registry-1.docker.io" : registry);
    let addresses: string[];
    if (isIP(host)) addresses = [host];
    else if (host.toLowerCase() === "localhost" || host.toLowerCase().endsWith(".localhost")) addresses = ["127.0.0.1"];
    else {
      try {
        addresses = await this.probe.lookup(host);
      } catch {
        return; // Docker will say it cannot resolve it, in its words
      }
    }
    const own = this.probe.ownAddresses();
    if (addresses.some((address) => forbiddenAddress(address, own)))
      throw new RegistryRefusedError(
        `${what} is on a loopback, private or link-local address, or the node's own, which tenants' images may not be pulled from (the node's operator can allow a registry by name with AGENT_REGISTRY_ALLOW)`,
      );
  }
}

/** How long the registry's /v2/ may take to answer the guard before the pull goes ahead without its challenge. */
const CHALLENGE_TIMEOUT_MS = 5_000;

/** The real DNS, the registry over HTTPS (then HTTP, as Docker tries an insecure one), and this machine's interfaces. */
export const systemRegistryProbe: RegistryProbe = {
  lookup: async (host) => (await lookup(host, { all: true })).map((a) => a.address),
  async challenge(registry) {
    for (const scheme of ["https", "http"]) {
      try {
        const res = await fetch(`${scheme}://${registry}/v2/`, { redirect: "manual", signal: AbortSignal.timeout(CHALLENGE_TIMEOUT_MS) });
        await res.body?.cancel();
        return res.headers.get("www-authenticate") ?? undefined;
      } catch {
        // not over this scheme: the next, or no challenge seen
      }
    }
    return undefined;
  },
  ownAddresses: () =>
    Object.values(networkInterfaces())
      .flat()
      .flatMap((i) => (i ? [i.address.replace(/%.*$/, "")] : [])),
};
