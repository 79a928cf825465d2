// Which registries the node's Docker may pull a tenant's image from: decided on
// the addresses a name resolves to and the realm its challenge names, with the
// operator's allow list. The same against real Docker and loopback services is
// in apps/control-plane/test/e2e/registry-guard.test.ts.
import { describe, expect, it } from "vitest";
import { bearerRealm, forbiddenAddress, RegistryGuard, type RegistryProbe } from "../../src/egress/registry-guard";

const OWN = ["192.0.2.10", "2001:db8::10"];

function probe(dns: Record<string, string[]>, challenges: Record<string, string> = {}): RegistryProbe {
  return {
    lookup: async (host) => {
      const found = dns[host];
      if (!found) throw new Error(`ENOTFOUND ${host}`);
      return found;
    },
    challenge: async (registry) => challenges[registry],
    ownAddresses: () => OWN,
  };
}

describe("forbiddenAddress", () => {
  it("refuses loopback, private, shared, link-local and the node's own addresses, in both families", () => {
    for (const address of [
      "127.0.0.1",
      "10.1.2.3",
      "172.20.0.1",
      "192.168.1.1",
      "100.64.0.1",
      "169.254.169.254",
      "0.0.0.0",
      "::1",
      "fe80::1",
      "fd00::1",
      "::ffff:127.0.0.1",
      "::ffff:169.254.169.254",
      ...OWN,
    ])
      expect(forbiddenAddress(address, OWN), address).toBe(true);
    for (const address of ["203.0.113.7", "2606:4700::1111", "::ffff:203.0.113.7"]) expect(forbiddenAddress(address, OWN), address).toBe(false);
  });
});

describe("bearerRealm", () => {
  it("reads the realm of a Bearer challenge as registries write it", () => {
    expect(bearerRealm('Bearer realm="https://auth.docker.io/token",service="registry.docker.io"')).toBe("https://auth.docker.io/token");
    expect(bearerRealm("bearer realm=http://169.254.169.254/x,service=y")).toBe("http://169.254.169.254/x");
    expect(bearerRealm('Basic realm="registry"')).toBeUndefined();
    expect(bearerRealm(undefined)).toBeUndefined();
  });
});

describe("RegistryGuard", () => {
  const dns = {
    "ghcr.io": ["203.0.113.5"],
    "registry.lan": ["10.0.0.5"],
    "auth.example": ["203.0.113.9"],
    "meta.example": ["169.254.169.254"],
    "self.example": ["192.0.2.10"],
  };

  it("lets a public registry with a public token service be pulled from, Docker Hub's included", async () => {
    const guard = new RegistryGuard(
      probe(
        { ...dns, "registry-1.docker.io": ["203.0.113.1"] },
        { "ghcr.io": 'Bearer realm="https://auth.example/token"', "registry-1.docker.io": 'Bearer realm="https://auth.example/t"' },
      ),
    );
    await expect(guard.check("ghcr.io/org/app:1")).resolves.toBeUndefined();
    await expect(guard.check("pytorch/pytorch:2")).resolves.toBeUndefined();
    // A name nobody resolves is Docker's to report, in its words.
    await expect(guard.check("registry.example.invalid/app:1")).resolves.toBeUndefined();
  });

  it("refuses a registry on a private address, the node's own, or localhost, unless allowed by name", async () => {
    const guard = new RegistryGuard(probe(dns));
    await expect(guard.check("registry.lan:5000/app:1")).rejects.toThrow(
      "the image's registry registry.lan:5000 is on a loopback, private or link-local address",
    );
    await expect(guard.check("self.example/app:1")).rejects.toThrow("is on a loopback, private or link-local address, or the node's own");
    await expect(guard.check("localhost:5000/app")).rejects.toThrow("AGENT_REGISTRY_ALLOW");
    await expect(guard.check("[::1]:5000/app")).rejects.toThrow("AGENT_REGISTRY_ALLOW");
    await expect(new RegistryGuard(probe(dns), ["registry.lan:5000"]).check("registry.lan:5000/app:1")).resolves.toBeUndefined();
    // Allowed by name with its port: the same host on another port is another registry.
    await expect(new RegistryGuard(probe(dns), ["registry.lan:5000"]).check("registry.lan:6000/app:1")).rejects.toThrow("registry.lan:6000");
  });

  it("refuses a registry whose token service is on a link-local address (a cloud's metadata), allowed registry or not", async () => {
    const challenges = { "ghcr.io": 'Bearer realm="http://meta.example/latest/meta-data/"', "registry.lan:5000": 'Bearer realm="http://169.254.169.254/"' };
    await expect(new RegistryGuard(probe(dns, challenges)).check("ghcr.io/x/y:1")).rejects.toThrow(
      "the token service meta.example that the registry ghcr.io names is on a loopback",
    );
    await expect(new RegistryGuard(probe(dns, challenges), ["registry.lan:5000"]).check("registry.lan:5000/app:1")).rejects.toThrow(
      "the token service 169.254.169.254 that the registry registry.lan:5000 names",
    );
    await expect(new RegistryGuard(probe(dns, challenges), ["registry.lan:5000", "169.254.169.254"]).check("registry.lan:5000/app:1")).resolves.toBeUndefined();
  });
});
