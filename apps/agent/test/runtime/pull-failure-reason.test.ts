// A failed pull's reason reaches the tenant: it must say what went wrong without
// the node's network details (its DNS resolver, proxies, addresses).

import { needs } from "@cm/testkit";
import Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { ImageUnavailableError } from "../../src/runtime/errors";
import { hideNetworkDetails, shortPullReason } from "../../src/runtime/network-details";

const IPV4 = /\b\d{1,3}(\.\d{1,3}){3}\b/;

describe("hideNetworkDetails", () => {
  it("drops the resolver from a failed lookup (recorded from Docker 20.10 without a network)", () => {
    const docker =
      'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host';
    expect(hideNetworkDetails(docker)).toBe(
      'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host',
    );
  });

  it("hides addresses of the node's proxies and peers, in both families", () => {
    expect(hideNetworkDetails('Get "https://ghcr.io/v2/": proxyconnect tcp: dial tcp 10.0.0.5:3128: connect: connection refused')).toBe(
      'Get "https://ghcr.io/v2/": proxyconnect tcp: dial tcp (address hidden): connect: connection refused',
    );
    expect(hideNetworkDetails("lookup quay.io on [fd00::53]:53: server misbehaving")).toBe("lookup quay.io: server misbehaving");
    expect(hideNetworkDetails("read udp 172.17.0.1:40000->[2001:db8::1]:53: i/o timeout")).toBe("read udp (address hidden)->(address hidden): i/o timeout");
  });

  it("keeps what the tenant wrote, and text that only looks like numbers", () => {
    expect(hideNetworkDetails('Get "https://10.1.2.3:5000/v2/": dial tcp 10.1.2.3:5000: connect: no route to host', ["10.1.2.3:5000/app:1.2.3"])).toBe(
      'Get "https://10.1.2.3:5000/v2/": dial tcp 10.1.2.3:5000: connect: no route to host',
    );
    expect(hideNetworkDetails("manifest for app:1.2.3 not found: manifest unknown at 12:30:45")).toBe(
      "manifest for app:1.2.3 not found: manifest unknown at 12:30:45",
    );
  });
});

needs("docker").describe("a failed pull through Docker", () => {
  it("says the registry's name could not be resolved, without the node's resolver", async () => {
    const runtime = new DockerRuntime({ docker: new Docker() });
    const ref = "registry.example.invalid/tenant/app:1";
    const error = await runtime.ensureImage(ref).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ImageUnavailableError);
    const message = (error as Error).message;
    expect(message).toContain("registry.example.invalid");
    expect(message).not.toMatch(IPV4);
    expect(message).not.toMatch(/ on \[?[0-9a-f:.]+\]?:53/);
  });
});

describe("shortPullReason", () => {
  it("drops the body of what answered instead of a registry (recorded from Docker 20.10: a JSON 404 on the loopback)", () => {
    const docker =
      'error parsing HTTP 404 response body: no error details found in HTTP response body: "{\\"error\\":{\\"code\\":\\"NOT_FOUND\\",\\"message\\":\\"secret internal page /admin\\",\\"requestId\\":\\"req_123\\"}}"';
    expect(shortPullReason(docker)).toBe("error parsing HTTP 404 response body not shown");
  });

  it("keeps a registry's short error and cuts a long one on whole characters", () => {
    expect(shortPullReason("manifest unknown: manifest unknown")).toBe("manifest unknown: manifest unknown");
    const long = shortPullReason(`unauthorized: ${"😀".repeat(3000)}`);
    expect(Array.from(long)).toHaveLength(300);
    expect(long.endsWith("😀…")).toBe(true);
  });
});
