// The egress policy on this machine's real firewall, with deployments made by the
// agent's own runtime. Test hosts live in network namespaces joined to the host
// by veth pairs: one holding a private address, one the cloud metadata address,
// one a public documentation address (standing in for the internet). The policy
// goes into chains and bridge names of this run's own, so an agent or another
// test on the machine is never touched, and everything is removed afterwards.
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, get, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect } from "vitest";
import { hostResolvers } from "../../src/deps";
import { spawnCommand } from "../../src/egress/command";
import { IptablesFirewall } from "../../src/egress/iptables";
import type { EgressPolicy } from "../../src/egress/policy";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";

const run = dockerTestRun();
const id = randomBytes(2).toString("hex");
const bridgePrefix = `cx${id}`;
const policy: EgressPolicy = {
  interfacePrefix: bridgePrefix,
  egressChain: `CMT-${id}-EGRESS`,
  inputChain: `CMT-${id}-INPUT`,
  allow: [],
  resolvers: hostResolvers(),
};
const firewall = new IptablesFirewall(policy, spawnCommand);
const runtime = new DockerRuntime({ docker: run.docker, sandboxPool: 0, bridgePrefix });

const cleanups: Array<() => void | Promise<void>> = [];
let hostServer: Server;

interface TestHost {
  address: string;
}

/** A namespace `name` holding `nsAddress`, reached from the host through `hostAddress`, serving a marker on each port. */
function testHost(name: string, hostAddress: string, nsAddress: string, prefixLength: number, ports: number[]): TestHost {
  const ns = `cmt-${id}-${name}`;
  const hostSide = `cmt${id}${name}0`;
  const nsSide = `cmt${id}${name}1`;
  const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
  ip("netns", "add", ns);
  cleanups.push(() => void execFileSync("ip", ["netns", "del", ns], { stdio: "ignore" })); // takes the veth pair and its routes with it
  ip("link", "add", hostSide, "type", "veth", "peer", "name", nsSide);
  cleanups.push(() => void execFileSync("ip", ["link", "del", hostSide], { stdio: "ignore" }));
  ip("link", "set", nsSide, "netns", ns);
  ip("addr", "add", `${hostAddress}/${prefixLength}`, "dev", hostSide);
  ip("link", "set", hostSide, "up");
  ip("netns", "exec", ns, "ip", "addr", "add", `${nsAddress}/${prefixLength}`, "dev", nsSide);
  ip("netns", "exec", ns, "ip", "link", "set", nsSide, "up");
  ip("netns", "exec", ns, "ip", "link", "set", "lo", "up");
  ip("netns", "exec", ns, "ip", "route", "add", "default", "via", hostAddress);
  const www = mkdtempSync(join(tmpdir(), `cmt-${name}-`));
  cleanups.push(() => rmSync(www, { recursive: true, force: true }));
  writeFileSync(join(www, "index.html"), `reached-${name}\n`);
  for (const port of ports) {
    const server: ChildProcess = spawn("ip", ["netns", "exec", ns, "busybox", "httpd", "-f", "-p", `${nsAddress}:${port}`, "-h", www], { stdio: "ignore" });
    cleanups.push(() => void server.kill("SIGKILL"));
  }
  return { address: nsAddress };
}

/**
 * The body the deployment's container reads from http://address:port/, or
 * "unreachable". Through nc: the static busybox's wget dies of SIGSEGV in these images.
 */
function probe(containerId: string, address: string, port: number): Promise<string> {
  const request = `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 ${address} ${port}`;
  return new Promise((resolve) => {
    execFile("docker", ["exec", containerId, "sh", "-c", request], { encoding: "utf8", timeout: 15_000 }, (error, stdout) => {
      const body = stdout
        .split(/\r?\n\r?\n/)
        .slice(1)
        .join("\n")
        .trim();
      resolve(error || !body ? "unreachable" : body);
    });
  });
}

/**
 * Whether the deployment's container resolves `name`: through Docker's embedded
 * DNS, or asking `server` itself. Docker's resolver may reuse one flow to the
 * host's resolver, which conntrack keeps ESTABLISHED for minutes whatever the
 * rules for new flows say; a query of the container's own opens a new flow.
 */
function resolves(containerId: string, name: string, server?: string): Promise<boolean> {
  return new Promise((resolve) => {
    execFile("docker", ["exec", containerId, "nslookup", name, ...(server ? [server] : [])], { encoding: "utf8", timeout: 20_000 }, (error, stdout) =>
      resolve(!error && /^Name:/m.test(stdout)),
    );
  });
}

/** From the host, as the agent's tunnel reaches a tenant's port. */
function fetchFromHost(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, { timeout: 5_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve(body.trim()));
    }).on("error", reject);
  });
}

async function deploy(suffix: string, cmd: string[]): Promise<{ id: string; ip: string; gateway: string; bridge: string }> {
  const containerId = await runtime.createContainer({
    deploymentId: run.deploymentId(suffix),
    nodeId: "node-egress",
    userId: "user-egress",
    image: ensureBusyboxImage(),
    env: {},
    cmd,
    exposedPorts: [],
    cpuCores: 0,
    memoryMb: 64,
    gpuDeviceIds: [],
    labels: run.labels,
  });
  await runtime.start(containerId);
  const state = await runtime.inspect(containerId);
  const sandbox = state.labels["cm.sandbox-name"]!;
  const network = await run.docker.getNetwork(sandbox).inspect();
  return {
    id: containerId,
    ip: state.ipAddress ?? "",
    gateway: network.IPAM?.Config?.[0]?.Gateway ?? "",
    bridge: network.Options?.["com.docker.network.bridge.name"] ?? "",
  };
}

function hasIpv6(): boolean {
  try {
    execFileSync("ip6tables", ["-w", "5", "-S", "INPUT"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

async function cleanup(): Promise<void> {
  await firewall.remove().catch(() => {});
  for (const step of cleanups.splice(0).reverse()) {
    try {
      await step();
    } catch {
      // already gone
    }
  }
  await run.cleanup();
}

const firewallTests = needs("docker", "busybox", "firewall");

firewallTests.describe("the egress policy on the real firewall", () => {
  let tenant: Awaited<ReturnType<typeof deploy>>;
  let other: Awaited<ReturnType<typeof deploy>>;
  let hostPort = 0;
  let privateHost: TestHost;
  let metadata: TestHost;
  let publicHost: TestHost;

  beforeAll(async () => {
    hostServer = createServer((_req, res) => res.end("reached-host\n"));
    await new Promise<void>((resolve) => hostServer.listen(0, "0.0.0.0", resolve));
    cleanups.push(() => void hostServer.close());
    hostPort = (hostServer.address() as AddressInfo).port;
    privateHost = testHost("p", "10.213.7.1", "10.213.7.2", 24, [80]);
    // A /30, so only the metadata address itself is routed here for the test's few seconds.
    metadata = testHost("m", "169.254.169.253", "169.254.169.254", 30, [80]);
    publicHost = testHost("i", "203.0.113.1", "203.0.113.10", 24, [80, 25]);
    [tenant, other] = await Promise.all([
      deploy("tenant", ["sleep", "3600"]),
      deploy("other", ["sh", "-c", "mkdir -p /tmp/w && echo reached-other > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w"]),
    ]);
  }, 60_000);
  afterAll(cleanup, 60_000);

  firewallTests.it("names deployments' bridges with the prefix the rules match", () => {
    expect(tenant.bridge.startsWith(bridgePrefix)).toBe(true);
    expect(tenant.bridge.length).toBeLessThanOrEqual(15);
    execFileSync("ip", ["link", "show", tenant.bridge], { stdio: "ignore" });
  });

  firewallTests.it(
    "without the policy, a tenant reaches the host and the LAN (what the policy is for)",
    async () => {
      const [host, lan, meta, smtp] = await Promise.all([
        probe(tenant.id, tenant.gateway, hostPort),
        probe(tenant.id, privateHost.address, 80),
        probe(tenant.id, metadata.address, 80),
        probe(tenant.id, publicHost.address, 25),
      ]);
      expect({ host, lan, meta, smtp }).toEqual({ host: "reached-host", lan: "reached-p", meta: "reached-m", smtp: "reached-i" });
    },
    30_000,
  );

  firewallTests.it(
    "with it, the internet only: not the host, the LAN, metadata, other deployments or SMTP",
    async () => {
      expect(await firewall.ensure()).toEqual({ changed: true });
      if (hasIpv6()) expect(execFileSync("ip6tables", ["-w", "5", "-S", policy.egressChain], { encoding: "utf8" })).toContain("-d fe80::/10 -j REJECT");
      const [gatewayHost, hostOnItsPublicAddress, lan, meta, neighbour, internet, smtp] = await Promise.all([
        probe(tenant.id, tenant.gateway, hostPort),
        probe(tenant.id, "203.0.113.1", hostPort),
        probe(tenant.id, privateHost.address, 80),
        probe(tenant.id, metadata.address, 80),
        probe(tenant.id, other.ip, 8080),
        probe(tenant.id, publicHost.address, 80),
        probe(tenant.id, publicHost.address, 25),
      ]);
      expect({ gatewayHost, hostOnItsPublicAddress, lan, meta, neighbour, smtp }).toEqual({
        gatewayHost: "unreachable",
        hostOnItsPublicAddress: "unreachable",
        lan: "unreachable",
        meta: "unreachable",
        neighbour: "unreachable",
        smtp: "unreachable",
      });
      expect(internet).toBe("reached-i");
      // Replies still flow: the host (the agent's tunnel) reaches a tenant's port.
      expect(await fetchFromHost(`http://${other.ip}:8080/`)).toBe("reached-other");
    },
    60_000,
  );

  firewallTests.it(
    "lets the tenant's DNS through to the host's resolvers, and only through that rule",
    async () => {
      // Docker's embedded DNS (127.0.0.11 in the container) forwards from the container's own namespace.
      if (policy.resolvers.length === 0) return; // a machine without a resolver has no DNS to let through
      const resolver = policy.resolvers[0]!;
      expect(await resolves(tenant.id, "registry.npmjs.org")).toBe(true);
      expect(await resolves(tenant.id, "registry.npmjs.org", resolver)).toBe(true);
      // The same policy without its DNS rules: the resolver is a private address like any other.
      expect(await new IptablesFirewall({ ...policy, resolvers: [] }, spawnCommand).ensure()).toEqual({ changed: true });
      expect(await resolves(tenant.id, "registry.npmjs.org", resolver)).toBe(false);
      // A changed policy is told from the installed one, and replaces it.
      expect(await firewall.ensure()).toEqual({ changed: true });
      expect(await resolves(tenant.id, "registry.npmjs.org", resolver)).toBe(true);
      expect(await resolves(tenant.id, "registry.npmjs.org")).toBe(true);
    },
    60_000,
  );

  firewallTests.it(
    "is idempotent, notices tampering, and puts itself back",
    async () => {
      expect(await firewall.ensure()).toEqual({ changed: false });
      expect(await firewall.check()).toEqual([]);
      // In place, a check is one listing per family: the jumps are found in it as this iptables prints them.
      const ran: string[] = [];
      const counted = new IptablesFirewall(policy, (command, args, input) => {
        ran.push([command, ...args].join(" "));
        return spawnCommand(command, args, input);
      });
      expect(await counted.ensure()).toEqual({ changed: false });
      expect(ran).toEqual(["iptables -w 5 -S", "ip6tables -w 5 -S"]);
      execFileSync("iptables", ["-w", "5", "-F", policy.egressChain]);
      expect(await firewall.check()).toEqual([`iptables: chain ${policy.egressChain} holds other rules than the policy's`]);
      execFileSync("iptables", ["-w", "5", "-D", "INPUT", "-i", `${bridgePrefix}+`, "-j", policy.inputChain]);
      expect(await firewall.check()).toContain(`iptables: INPUT does not jump to ${policy.inputChain}`);
      expect(await firewall.ensure()).toEqual({ changed: true });
      expect(await firewall.check()).toEqual([]);
      // One jump each, however often it was ensured.
      const input = execFileSync("iptables", ["-w", "5", "-S", "INPUT"], { encoding: "utf8" });
      expect(input.split("\n").filter((line) => line.includes(`-j ${policy.inputChain}`))).toHaveLength(1);
      expect(await probe(tenant.id, tenant.gateway, hostPort)).toBe("unreachable");
    },
    30_000,
  );

  firewallTests.it(
    "is removed without a trace",
    async () => {
      await firewall.remove();
      expect(execFileSync("iptables-save", { encoding: "utf8" })).not.toContain(`CMT-${id}`);
      // IPv6 too, where the machine has it (its chains hang off FORWARD when Docker keeps no IPv6 DOCKER-USER).
      if (hasIpv6()) expect(execFileSync("ip6tables-save", { encoding: "utf8" })).not.toContain(`CMT-${id}`);
      expect(await firewall.check()).toEqual(
        expect.arrayContaining([`iptables: chain ${policy.egressChain} is missing`, `iptables: chain ${policy.inputChain} is missing`]),
      );
      expect(await probe(tenant.id, tenant.gateway, hostPort)).toBe("reached-host");
    },
    30_000,
  );
});
