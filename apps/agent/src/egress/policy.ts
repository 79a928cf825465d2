// What a tenant's container may reach, as data, and the firewall rules that say
// it, built by pure functions so the policy is tested without a firewall. The
// rules go into chains of our own: one jumped to from DOCKER-USER (forwarded
// traffic: the internet, the LAN, other bridges) and one from INPUT (the host's
// own addresses, which a container reaches through its gateway without ever
// being forwarded).
import { createHash } from "node:crypto";
import { isIP } from "node:net";

export type IpFamily = 4 | 6;

/** One AGENT_EGRESS_ALLOW entry: a range, a port, or a port within a range. */
export interface EgressAllow {
  /** "10.1.2.0/24", "fd00::/8"; absent: any public address (the entry only reopens a port) */
  cidr?: string;
  family?: IpFamily;
  port?: { protocol: "tcp" | "udp"; number: number };
}

export interface EgressPolicy {
  /** the bridges of deployments' networks are named with it (sandboxes.ts), so rules need not change per deployment */
  interfacePrefix: string;
  /** chain names; tests use their own so they never touch an agent's */
  egressChain: string;
  inputChain: string;
  allow: EgressAllow[];
  /** the host's resolvers (resolv.conf): Docker's embedded DNS forwards to them from inside the container */
  resolvers: string[];
}

/**
 * Private, shared, loopback, link-local (cloud metadata at 169.254.169.254),
 * benchmarking, multicast and reserved IPv4 ranges: where the operator's own
 * machines and services live. Documentation ranges (192.0.2/24, 198.51.100/24,
 * 203.0.113/24) are left alone: nothing real is there, and tests stand in for
 * "the internet" with them.
 */
export const BLOCKED_IPV4 = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "224.0.0.0/4",
  "240.0.0.0/4",
] as const;

/** Unique local, link-local, deprecated site-local, IPv4-mapped, loopback, discard-only and multicast. */
export const BLOCKED_IPV6 = ["::1/128", "::ffff:0:0/96", "100::/64", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8"] as const;

/** Outbound SMTP: a tenant sending mail from an operator's address gets the operator blacklisted. */
export const BLOCKED_TCP_PORTS = [25] as const;

export const DEFAULT_INTERFACE_PREFIX = "cm-";
export const EGRESS_CHAIN = "CM-EGRESS";
export const INPUT_CHAIN = "CM-INPUT";

/** A rule as iptables arguments after `-A <chain>`. */
export type RuleSpec = string[];

export interface ChainPlan {
  chain: string;
  /** the built-in or Docker chain that jumps to it */
  from: string;
  /** the jump's match, e.g. ["-i", "cm-+"] */
  match: RuleSpec;
  rules: RuleSpec[];
}

export interface FamilyPlan {
  family: IpFamily;
  chains: ChainPlan[];
  /** on the first rule of every chain: what tells an installed plan from a stale one */
  fingerprint: string;
}

/** The rules for one address family; `forwardChain` is DOCKER-USER, or FORWARD where Docker keeps no DOCKER-USER (IPv6 off). */
export function egressPlan(policy: EgressPolicy, family: IpFamily, forwardChain = "DOCKER-USER"): FamilyPlan {
  const inFamily = (cidr: string | undefined) => cidr === undefined || familyOf(cidr) === family;
  const ranged = policy.allow.filter((entry) => entry.cidr !== undefined && inFamily(entry.cidr));
  const reopened = new Set(
    policy.allow.filter((entry) => entry.cidr === undefined && entry.port).map((entry) => `${entry.port!.protocol}/${entry.port!.number}`),
  );
  const resolvers = policy.resolvers.filter((address) => isIP(address) === family && !isLoopback(address));
  const blocked = family === 4 ? BLOCKED_IPV4 : BLOCKED_IPV6;

  // Replies to connections the host opened (the agent's tunnels to a tenant's port) and their ICMP errors.
  const established: RuleSpec = ["-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "RETURN"];
  const dns = resolvers.flatMap((address) => ["udp", "tcp"].map((protocol) => ["-d", hostCidr(address), "-p", protocol, "--dport", "53", "-j", "RETURN"]));
  const allowed = ranged.map((entry) => [...["-d", entry.cidr!], ...portMatch(entry.port), "-j", "RETURN"]);
  const reject = family === 4 ? ["-j", "REJECT", "--reject-with", "icmp-port-unreachable"] : ["-j", "REJECT", "--reject-with", "icmp6-port-unreachable"];

  const egress: RuleSpec[] = [
    established,
    ...dns,
    ...allowed,
    ...blocked.map((cidr) => ["-d", cidr, ...reject]),
    ...BLOCKED_TCP_PORTS.filter((port) => !reopened.has(`tcp/${port}`)).map((port) => [
      "-p",
      "tcp",
      "--dport",
      String(port),
      "-j",
      "REJECT",
      "--reject-with",
      "tcp-reset",
    ]),
  ];
  // The host itself, on every address it has: only DNS to a resolver it runs, and what the operator allowed.
  const input: RuleSpec[] = [established, ...dns, ...allowed, reject];

  const match = ["-i", `${policy.interfacePrefix}+`];
  const chains: ChainPlan[] = [
    { chain: policy.egressChain, from: forwardChain, match, rules: egress },
    { chain: policy.inputChain, from: "INPUT", match, rules: input },
  ];
  const fingerprint = createHash("sha256").update(JSON.stringify(chains)).digest("hex").slice(0, 16);
  for (const plan of chains)
    plan.rules[0] = [...plan.rules[0]!.slice(0, -2), "-m", "comment", "--comment", `cm-egress ${fingerprint}`, ...plan.rules[0]!.slice(-2)];
  return { family, chains, fingerprint };
}

/** iptables-restore input that replaces the plan's chains in one transaction (with --noflush, other chains stay). */
export function restoreScript(plan: FamilyPlan): string {
  const lines = ["*filter", ...plan.chains.map((c) => `:${c.chain} - [0:0]`)];
  for (const c of plan.chains) for (const rule of c.rules) lines.push(["-A", c.chain, ...rule.map(quoteArg)].join(" "));
  lines.push("COMMIT", "");
  return lines.join("\n");
}

function quoteArg(arg: string): string {
  return /^[A-Za-z0-9_.:/,+-]+$/.test(arg) ? arg : `"${arg.replace(/(["\\])/g, "\\$1")}"`;
}

function portMatch(port: EgressAllow["port"]): string[] {
  return port ? ["-p", port.protocol, "--dport", String(port.number)] : [];
}

function familyOf(cidr: string): IpFamily {
  return cidr.includes(":") ? 6 : 4;
}

function hostCidr(address: string): string {
  return `${address}/${isIP(address) === 6 ? 128 : 32}`;
}

function isLoopback(address: string): boolean {
  return address.startsWith("127.") || address === "::1";
}

/**
 * AGENT_EGRESS_ALLOW: entries separated by commas; each a range ("10.8.0.0/16",
 * a bare address is one host), a port ("tcp/587", "udp/123", a bare number is
 * TCP), or both ("192.168.1.20 tcp/5432"). Returns the entries, or the problems.
 */
export function parseEgressAllow(text: string): { ok: true; allow: EgressAllow[] } | { ok: false; problems: string[] } {
  const allow: EgressAllow[] = [];
  const problems: string[] = [];
  for (const raw of text
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean)) {
    const entry: EgressAllow = {};
    let bad = false;
    for (const token of raw.split(/\s+/)) {
      const port = /^(?:(tcp|udp)\/)?(\d{1,5})$/i.exec(token);
      if (port && !entry.port && Number(port[2]) >= 1 && Number(port[2]) <= 65535) {
        entry.port = { protocol: (port[1]?.toLowerCase() ?? "tcp") as "tcp" | "udp", number: Number(port[2]) };
        continue;
      }
      const cidr = entry.cidr ? undefined : normalCidr(token);
      if (cidr) {
        entry.cidr = cidr;
        entry.family = familyOf(cidr);
        continue;
      }
      bad = true;
    }
    if (bad || (!entry.cidr && !entry.port))
      problems.push(`AGENT_EGRESS_ALLOW: "${raw}" is not a range (10.8.0.0/16), a port (tcp/587) or both ("192.168.1.20 tcp/5432")`);
    else allow.push(entry);
  }
  return problems.length ? { ok: false, problems } : { ok: true, allow };
}

function normalCidr(token: string): string | undefined {
  const [address = "", prefix, extra] = token.split("/");
  const family = isIP(address);
  if (!family || extra !== undefined) return undefined;
  const max = family === 4 ? 32 : 128;
  if (prefix === undefined) return `${address}/${max}`;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return undefined;
  return `${address}/${Number(prefix)}`;
}

/** The nameservers of a resolv.conf. */
export function parseResolvConf(text: string): string[] {
  return text
    .split("\n")
    .map((line) => /^\s*nameserver\s+(\S+)/.exec(line)?.[1]?.replace(/%.*$/, ""))
    .filter((address): address is string => !!address && isIP(address) !== 0);
}
