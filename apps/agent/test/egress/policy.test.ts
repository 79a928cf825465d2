// The egress policy as data: which rules a policy makes, and how AGENT_EGRESS_ALLOW
// and resolv.conf are read. The rules themselves meet the real firewall in firewall.test.ts.
import { describe, expect, it } from "vitest";
import type { EgressPolicy } from "../../src/egress/policy";
import { egressPlan, parseEgressAllow, parseResolvConf, restoreScript } from "../../src/egress/policy";

const policy: EgressPolicy = {
  interfacePrefix: "cm-",
  egressChain: "CM-EGRESS",
  inputChain: "CM-INPUT",
  allow: [],
  resolvers: ["10.255.255.53", "127.0.0.53"],
};

const rulesOf = (plan: ReturnType<typeof egressPlan>, chain: string) => plan.chains.find((c) => c.chain === chain)!.rules.map((rule) => rule.join(" "));

describe("egressPlan", () => {
  it("lets replies and DNS to the host's resolvers through, then refuses private, link-local and SMTP", () => {
    const plan = egressPlan(policy, 4);
    const egress = rulesOf(plan, "CM-EGRESS");
    expect(egress[0]).toBe(`-m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment cm-egress ${plan.fingerprint} -j RETURN`);
    expect(egress.slice(1, 3)).toEqual(["-d 10.255.255.53/32 -p udp --dport 53 -j RETURN", "-d 10.255.255.53/32 -p tcp --dport 53 -j RETURN"]);
    // The local stub resolver is Docker's to bypass, never a tenant's to reach.
    expect(egress.join("\n")).not.toContain("127.0.0.53");
    for (const range of ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"]) {
      expect(egress).toContain(`-d ${range} -j REJECT --reject-with icmp-port-unreachable`);
    }
    expect(egress.at(-1)).toBe("-p tcp --dport 25 -j REJECT --reject-with tcp-reset");
    expect(egress.join("\n")).not.toContain("203.0.113");
  });

  it("refuses everything to the host itself but replies and DNS", () => {
    const input = rulesOf(egressPlan(policy, 4), "CM-INPUT");
    expect(input).toHaveLength(4);
    expect(input.at(-1)).toBe("-j REJECT --reject-with icmp-port-unreachable");
  });

  it("jumps from DOCKER-USER and INPUT for the deployments' bridges only", () => {
    const plan = egressPlan(policy, 4);
    expect(plan.chains.map((c) => [c.from, c.match.join(" "), c.chain])).toEqual([
      ["DOCKER-USER", "-i cm-+", "CM-EGRESS"],
      ["INPUT", "-i cm-+", "CM-INPUT"],
    ]);
  });

  it("opens the operator's ranges before the refusals, and a reopened port only towards the internet", () => {
    const allow = parseEgressAllow("192.168.1.20 tcp/5432, tcp/25, fd00::/8");
    if (!allow.ok) throw new Error(allow.problems.join());
    const plan = egressPlan({ ...policy, allow: allow.allow }, 4);
    const egress = rulesOf(plan, "CM-EGRESS");
    const opened = egress.indexOf("-d 192.168.1.20/32 -p tcp --dport 5432 -j RETURN");
    expect(opened).toBeGreaterThan(0);
    expect(opened).toBeLessThan(egress.indexOf("-d 192.168.0.0/16 -j REJECT --reject-with icmp-port-unreachable"));
    expect(egress.join("\n")).not.toContain("--dport 25");
    expect(egress.join("\n")).not.toContain("fd00");
    expect(rulesOf(plan, "CM-INPUT")).toContain("-d 192.168.1.20/32 -p tcp --dport 5432 -j RETURN");
    // IPv6 gets its ranges, its own reject, and no IPv4 resolver.
    const v6 = rulesOf(egressPlan({ ...policy, allow: allow.allow }, 6, "FORWARD"), "CM-EGRESS");
    expect(v6).toContain("-d fd00::/8 -j RETURN");
    expect(v6).toContain("-d fe80::/10 -j REJECT --reject-with icmp6-port-unreachable");
    expect(v6.join("\n")).not.toContain("10.255.255.53");
  });

  it("fingerprints the rules, so a changed policy is told from the installed one", () => {
    const a = egressPlan(policy, 4).fingerprint;
    expect(egressPlan(policy, 4).fingerprint).toBe(a);
    expect(egressPlan({ ...policy, resolvers: [] }, 4).fingerprint).not.toBe(a);
  });

  it("writes an iptables-restore script that replaces only its own chains", () => {
    const script = restoreScript(egressPlan(policy, 4));
    expect(script.split("\n").slice(0, 3)).toEqual(["*filter", ":CM-EGRESS - [0:0]", ":CM-INPUT - [0:0]"]);
    expect(script).toContain('-A CM-EGRESS -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment "cm-egress ');
    expect(script).not.toContain("DOCKER-USER");
    expect(script.trimEnd().endsWith("COMMIT")).toBe(true);
  });
});

describe("parseEgressAllow", () => {
  it("reads ranges, addresses, ports and both", () => {
    expect(parseEgressAllow(" 10.8.0.0/16, 192.168.1.20 tcp/5432 ,udp/123, 587, 2001:db8::1 ")).toEqual({
      ok: true,
      allow: [
        { cidr: "10.8.0.0/16", family: 4 },
        { cidr: "192.168.1.20/32", family: 4, port: { protocol: "tcp", number: 5432 } },
        { port: { protocol: "udp", number: 123 } },
        { port: { protocol: "tcp", number: 587 } },
        { cidr: "2001:db8::1/128", family: 6 },
      ],
    });
    expect(parseEgressAllow("")).toEqual({ ok: true, allow: [] });
  });

  it("names every entry it cannot read", () => {
    const parsed = parseEgressAllow("10.0.0.0/33, lan, tcp/70000, 10.0.0.1 10.0.0.2");
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.problems.map((p) => p.split('"')[1])).toEqual(["10.0.0.0/33", "lan", "tcp/70000", "10.0.0.1 10.0.0.2"]);
  });
});

describe("parseResolvConf", () => {
  it("takes the nameservers, dropping zone ids and junk", () => {
    expect(parseResolvConf("# generated\nsearch lan\nnameserver 192.168.1.1\nnameserver fe80::1%eth0\nnameserver bogus\noptions edns0\n")).toEqual([
      "192.168.1.1",
      "fe80::1",
    ]);
  });
});
