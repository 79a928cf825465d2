// The egress policy on the host's firewall through iptables and ip6tables
// (nf_tables or legacy, whichever the machine's Docker uses: both speak the same
// commands). Installing is idempotent and atomic per address family: the chains
// are replaced in one iptables-restore transaction, so there is never a moment
// with half a policy, and the jumps to them are added only when missing.
import type { CommandRunner } from "./command";
import type { EgressPolicy, FamilyPlan, IpFamily } from "./policy";
import { egressPlan, restoreScript } from "./policy";

/** The host's firewall as the egress guard sees it. */
export interface Firewall {
  /** Installs the policy where it is missing or stale; rejects when it cannot. */
  ensure(): Promise<{ changed: boolean }>;
  /** What is wrong with the installed policy; empty when it is in place. */
  check(): Promise<string[]>;
  /** Removes the chains and the jumps to them; absent is not an error. */
  remove(): Promise<void>;
}

/** xtables' lock: Docker and firewalld hold it briefly, wait for them rather than fail. */
const WAIT = ["-w", "5"];

interface FamilyTools {
  family: IpFamily;
  iptables: string;
  restore: string;
}

const TOOLS: FamilyTools[] = [
  { family: 4, iptables: "iptables", restore: "iptables-restore" },
  { family: 6, iptables: "ip6tables", restore: "ip6tables-restore" },
];

export class IptablesFirewall implements Firewall {
  constructor(
    /** read again at every check: the host's resolvers may change under DHCP, and the rules follow */
    private readonly policyNow: EgressPolicy | (() => EgressPolicy),
    private readonly run: CommandRunner,
  ) {}

  async ensure(): Promise<{ changed: boolean }> {
    let changed = false;
    for (const { tools, table } of await this.families()) {
      const plan = this.plan(tools, table);
      if (this.problems(tools, plan, table).length === 0 && (await this.jumpsMissing(tools, plan, table)).length === 0) continue;
      try {
        await this.install(tools, plan);
      } catch (error) {
        // Without Docker's IPv6 tables its bridges carry no IPv6 beyond link-local: the IPv6 rules are
        // a second fence there, and failing to put them up must not stop the node (check() still says so).
        if (tools.family === 6 && plan.chains[0]?.from === "FORWARD") continue;
        throw error;
      }
      changed = true;
    }
    return { changed };
  }

  private async install(tools: FamilyTools, plan: FamilyPlan): Promise<void> {
    await this.must(tools.restore, [...WAIT, "--noflush"], restoreScript(plan));
    for (const chain of plan.chains) {
      const jump = [...chain.match, "-j", chain.chain];
      // First in its chain: an operator's own ACCEPT rules in INPUT must not let a tenant past it.
      if ((await this.iptables(tools, ["-C", chain.from, ...jump])).code !== 0) await this.mustIptables(tools, ["-I", chain.from, "1", ...jump]);
    }
  }

  async check(): Promise<string[]> {
    const problems: string[] = [];
    let families: Array<{ tools: FamilyTools; table: FilterTable }>;
    try {
      families = await this.families();
    } catch (error) {
      return [(error as Error).message];
    }
    for (const { tools, table } of families) {
      try {
        const plan = this.plan(tools, table);
        problems.push(...this.problems(tools, plan, table), ...(await this.jumpsMissing(tools, plan, table)));
      } catch (error) {
        problems.push((error as Error).message);
      }
    }
    return problems;
  }

  async remove(): Promise<void> {
    for (const tools of TOOLS) {
      const listed = await this.iptables(tools, ["-S", "INPUT"]);
      if (listed.code !== 0) {
        // No ip6tables, or no IPv6, is nothing to remove; IPv4 refusing (not root) must be said.
        if (tools.family === 4 && listed.code !== 127) throw new Error(`iptables -S INPUT failed: ${oneLine(listed.stderr)}`);
        continue;
      }
      const plan = egressPlan(this.policy(), tools.family);
      for (const chain of plan.chains) {
        const froms = chain.from === "INPUT" ? ["INPUT"] : ["DOCKER-USER", "FORWARD"];
        for (const from of froms) {
          // A jump added twice (by hand, or two agents racing) is removed twice.
          for (let i = 0; i < 16 && (await this.iptables(tools, ["-D", from, ...chain.match, "-j", chain.chain])).code === 0; i++);
        }
        await this.iptables(tools, ["-F", chain.chain]);
        await this.iptables(tools, ["-X", chain.chain]);
      }
    }
  }

  private policy(): EgressPolicy {
    return typeof this.policyNow === "function" ? this.policyNow() : this.policyNow;
  }

  /**
   * Each family's filter table, read whole in one run: the check runs every 30 s
   * on an idle node, and a run per chain and jump (ten forks of the agent) was
   * most of what the agent spent at rest. IPv4 must answer; IPv6 is left out
   * where the machine has no ip6tables or no IPv6.
   */
  private async families(): Promise<Array<{ tools: FamilyTools; table: FilterTable }>> {
    const [ipv4, ipv6] = await Promise.all(TOOLS.map((tools) => this.iptables(tools, ["-S"])));
    if (ipv4!.code === 127) throw new Error("iptables is not installed");
    if (ipv4!.code !== 0) throw new Error(`iptables -S failed (exit ${ipv4!.code}): ${oneLine(ipv4!.stderr)}`);
    const families = [{ tools: TOOLS[0]!, table: filterTable(ipv4!.stdout) }];
    if (ipv6!.code === 0) families.push({ tools: TOOLS[1]!, table: filterTable(ipv6!.stdout) });
    return families;
  }

  /**
   * IPv4 always (no DOCKER-USER there means Docker does not manage iptables,
   * and then nothing isolates tenants); IPv6 where the machine has it. Docker
   * keeps no IPv6 DOCKER-USER unless its ip6tables option is on, so there the
   * chain is jumped to from FORWARD.
   */
  private plan(tools: FamilyTools, table: FilterTable): FamilyPlan {
    const hasDockerUser = table.has("DOCKER-USER");
    if (tools.family === 4) {
      if (!hasDockerUser) throw new Error("iptables has no DOCKER-USER chain: is Docker running, with its iptables option on?");
      return egressPlan(this.policy(), 4, "DOCKER-USER");
    }
    return egressPlan(this.policy(), 6, hasDockerUser ? "DOCKER-USER" : "FORWARD");
  }

  /** The policy's chains as the table holds them: missing, or holding other rules. */
  private problems(tools: FamilyTools, plan: FamilyPlan, table: FilterTable): string[] {
    const problems: string[] = [];
    for (const chain of plan.chains) {
      const rules = table.get(chain.chain);
      if (!rules) problems.push(`${tools.iptables}: chain ${chain.chain} is missing`);
      else if (!rules.some((rule) => rule.includes(`cm-egress ${plan.fingerprint}`)) || rules.length !== chain.rules.length)
        problems.push(`${tools.iptables}: chain ${chain.chain} holds other rules than the policy's`);
    }
    return problems;
  }

  /**
   * The jumps to the policy's chains. Found in the listing as iptables prints
   * them; a jump it prints in some other form is asked of iptables itself (-C),
   * which compares rules by meaning, so a missing one is only said when it is.
   */
  private async jumpsMissing(tools: FamilyTools, plan: FamilyPlan, table: FilterTable): Promise<string[]> {
    const problems: string[] = [];
    for (const chain of plan.chains) {
      const jump = [...chain.match, "-j", chain.chain];
      if (table.get(chain.from)?.includes(["-A", chain.from, ...jump].join(" "))) continue;
      if ((await this.iptables(tools, ["-C", chain.from, ...jump])).code !== 0)
        problems.push(`${tools.iptables}: ${chain.from} does not jump to ${chain.chain}`);
    }
    return problems;
  }

  private iptables(tools: FamilyTools, args: string[]) {
    return this.run(tools.iptables, [...WAIT, ...args]);
  }

  private async mustIptables(tools: FamilyTools, args: string[]): Promise<void> {
    await this.must(tools.iptables, [...WAIT, ...args]);
  }

  private async must(command: string, args: string[], input?: string): Promise<void> {
    const result = await this.run(command, args, input);
    if (result.code === 127) throw new Error(`${command} is not installed`);
    if (result.code !== 0) throw new Error(`${command} ${args.join(" ")} failed (exit ${result.code}): ${oneLine(result.stderr)}`);
  }
}

/** A filter table as `iptables -S` prints it: each chain (built-in or not) and its rules, in order. */
type FilterTable = Map<string, string[]>;

export function filterTable(listing: string): FilterTable {
  const table: FilterTable = new Map();
  for (const line of listing.split("\n")) {
    const [verb, chain] = line.split(" ", 2);
    if (!chain) continue;
    if (verb === "-P" || verb === "-N") {
      if (!table.has(chain)) table.set(chain, []);
    } else if (verb === "-A") {
      const rules = table.get(chain) ?? [];
      rules.push(line.trimEnd());
      table.set(chain, rules);
    }
  }
  return table;
}

function oneLine(text: string): string {
  return text.trim().replace(/\s+/g, " ").slice(0, 300);
}
