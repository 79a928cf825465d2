// What an operator meets of the egress policy: its config keys, doctor's line
// about it, and uninstall taking it away. The firewall is scripted here; the real
// one is in firewall.test.ts.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, configFromRaw } from "../../src/config";
import { hostResolvers } from "../../src/deps";
import type { DoctorDeps } from "../../src/install/doctor";
import { runDoctor } from "../../src/install/doctor";
import { runUninstall } from "../../src/install/uninstall";
import { fakeHostProbe } from "../support/agent-harness";

const base = { CONTROL_PLANE_URL: "https://cp.example.com", AGENT_TOKEN: "tok" };

describe("egress config", () => {
  it("is on by default with nothing allowed beyond the internet", () => {
    const config = configFromRaw(base);
    expect(config.egressPolicy).toBe("on");
    expect(config.egressAllow).toEqual([]);
  });

  it("reads AGENT_EGRESS_ALLOW and the opt-out", () => {
    const config = configFromRaw({ ...base, AGENT_EGRESS_POLICY: "off", AGENT_EGRESS_ALLOW: "10.8.0.0/16, tcp/587" });
    expect(config.egressPolicy).toBe("off");
    expect(config.egressAllow).toEqual([{ cidr: "10.8.0.0/16", family: 4 }, { port: { protocol: "tcp", number: 587 } }]);
  });

  it("refuses a typo rather than leaving a range open or closed by surprise", () => {
    const attempt = () => configFromRaw({ ...base, AGENT_EGRESS_POLICY: "no", AGENT_EGRESS_ALLOW: "10.8.0.0/16, lan" });
    expect(attempt).toThrow(ConfigError);
    try {
      attempt();
    } catch (error) {
      expect((error as ConfigError).problems).toEqual([
        'AGENT_EGRESS_POLICY must be "on" or "off"',
        'AGENT_EGRESS_ALLOW: "lan" is not a range (10.8.0.0/16), a port (tcp/587) or both ("192.168.1.20 tcp/5432")',
      ]);
    }
  });

  it("finds the resolvers Docker forwards to, past systemd-resolved's stub", () => {
    const files: Record<string, string> = {
      "/etc/resolv.conf": "nameserver 127.0.0.53\n",
      "/run/systemd/resolve/resolv.conf": "nameserver 192.168.1.1\nnameserver 1.1.1.1\n",
    };
    expect(hostResolvers((path) => files[path] ?? "")).toEqual(["192.168.1.1", "1.1.1.1"]);
    expect(hostResolvers(() => "nameserver 10.0.0.2\n")).toEqual(["10.0.0.2"]);
  });
});

async function doctorEgress(problems: string[], options: { raw?: Record<string, string>; agentRuns?: boolean } = {}): Promise<string[]> {
  const lines: string[] = [];
  const deps: DoctorDeps = {
    config: { ok: false, problems: ["skipped"] },
    dockerSocket: "/var/run/docker.sock",
    engine: {
      engineVersion: async () => "20.10",
      engineInfo: async () => ({ version: "20.10", dataRoot: "/var/lib/docker", runtimes: ["runc"], architecture: "x86_64" }),
    },
    hostProbe: fakeHostProbe(),
    fetch,
    egress: { check: async () => problems },
    print: (line) => lines.push(line),
  };
  if (options.raw) deps.config = { ok: true, value: configFromRaw({ ...base, ...options.raw }) };
  if (options.agentRuns) deps.agentStatus = { status: { pid: 1, agentVersion: "x", state: "ready", since: 0 }, alive: true };
  await runDoctor({ ...deps, fetch: (async () => new Response("", { status: 200 })) as typeof fetch });
  return lines.filter((line, i, all) => line.includes("Egress policy") || (all[i - 1]?.includes("Egress policy") && line.startsWith("    fix:")));
}

describe("doctor's egress line", () => {
  it("says when the policy is in place", async () => {
    expect(await doctorEgress([])).toEqual(["✓ Egress policy: in place: tenants' containers reach the internet and DNS only"]);
  });

  it("fails when the agent runs without it, and only warns before the agent ever started", async () => {
    const missing = ["iptables: chain CM-EGRESS is missing"];
    const running = await doctorEgress(missing, { agentRuns: true });
    expect(running[0]).toBe("✗ Egress policy: missing while the agent runs, so it starts no deployment: iptables: chain CM-EGRESS is missing");
    expect(running[1]).toMatch(/^ {4}fix: the agent installs it at start/);
    expect((await doctorEgress(missing))[0]).toBe(
      "! Egress policy: not installed (the agent installs it when it starts): iptables: chain CM-EGRESS is missing",
    );
  });

  it("warns when the operator turned it off", async () => {
    const [line] = await doctorEgress([], { raw: { AGENT_EGRESS_POLICY: "off" } });
    expect(line).toMatch(/^! Egress policy: off \(AGENT_EGRESS_POLICY=off\): tenants' containers can reach this machine/);
  });
});

describe("uninstall", () => {
  it("disables the service, removes its unit and the egress policy, and keeps the token's file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cm-uninstall-"));
    try {
      writeFileSync(join(dir, "cm-agent.service"), "[Unit]\n");
      writeFileSync(join(dir, "agent.env"), "AGENT_TOKEN=x\n");
      const ran: string[] = [];
      let removed = false;
      const lines: string[] = [];
      const code = await runUninstall(
        {
          unitDir: dir,
          envFile: join(dir, "agent.env"),
          removeEgressPolicy: async () => {
            removed = true;
          },
        },
        {
          print: (line) => lines.push(line),
          run: async (command, args) => {
            ran.push([command, ...args].join(" "));
            return { code: 0, output: "" };
          },
          commandExists: () => true,
        },
      );
      expect(code).toBe(0);
      expect(ran).toEqual(["systemctl disable --now cm-agent", "systemctl daemon-reload"]);
      expect(removed).toBe(true);
      expect(lines).toContain(`✓ removed ${join(dir, "cm-agent.service")}`);
      expect(lines).toContain("✓ removed the egress policy from the firewall");
      expect(lines.some((line) => line.includes("agent.env was kept"))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("fails, saying so, when the firewall cannot be changed", async () => {
    const lines: string[] = [];
    const code = await runUninstall(
      {
        unitDir: "/nonexistent",
        envFile: "/nonexistent/agent.env",
        removeEgressPolicy: async () => Promise.reject(new Error("iptables -S INPUT failed: Permission denied (you must be root)")),
      },
      { print: (line) => lines.push(line), run: async () => ({ code: 0, output: "" }), commandExists: () => false },
    );
    expect(code).toBe(1);
    expect(lines).toContain("✗ could not remove the egress policy: iptables -S INPUT failed: Permission denied (you must be root)");
  });
});
