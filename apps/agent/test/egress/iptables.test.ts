// IptablesFirewall's decisions against a scripted iptables: what makes it fail,
// what it only notes, and how many programs a check runs. The commands' real
// effect is in firewall.test.ts.
import { describe, expect, it } from "vitest";
import type { CommandResult, CommandRunner } from "../../src/egress/command";
import { filterTable, IptablesFirewall } from "../../src/egress/iptables";
import type { EgressPolicy } from "../../src/egress/policy";

const policy: EgressPolicy = { interfacePrefix: "cm-", egressChain: "CM-EGRESS", inputChain: "CM-INPUT", allow: [], resolvers: [] };

/**
 * A filter table per family that restores and inserts change, listed by `-S`
 * as iptables prints it. IPv4 starts as Docker leaves it (a DOCKER-USER chain);
 * IPv6 without Docker's tables. `answer` overrides per command line (without the -w 5).
 */
function scripted(answer: (line: string) => Partial<CommandResult> | undefined = () => undefined): { run: CommandRunner; ran: string[] } {
  const ran: string[] = [];
  const tables: Record<string, string[]> = {
    iptables: ["-P INPUT ACCEPT", "-P FORWARD DROP", "-N DOCKER-USER", "-A DOCKER-USER -j RETURN"],
    ip6tables: ["-P INPUT ACCEPT", "-P FORWARD ACCEPT"],
  };
  const run: CommandRunner = async (command, args, input) => {
    const line = [command, ...args.filter((arg, i) => !(arg === "-w" || args[i - 1] === "-w"))].join(" ");
    ran.push(line);
    const given = answer(line);
    if (given) return { code: 0, stdout: "", stderr: "", ...given };
    const family = command.replace(/-restore$/, "");
    const table = tables[family]!;
    if (command.endsWith("-restore")) {
      for (const text of (input ?? "").split("\n")) {
        const chain = /^:(\S+)/.exec(text)?.[1];
        if (chain) {
          tables[family] = tables[family]!.filter((rule) => !rule.startsWith(`-A ${chain} `) && rule !== `-N ${chain}`);
          tables[family]!.push(`-N ${chain}`);
        } else if (text.startsWith("-A ")) tables[family]!.push(text);
      }
      return { code: 0, stdout: "", stderr: "" };
    }
    const [verb, chain, ...rest] = line.split(" ").slice(1);
    if (verb === "-S" && !chain) return { code: 0, stdout: `${table.join("\n")}\n`, stderr: "" };
    if (verb === "-I") {
      table.splice(table.findIndex((rule) => rule.startsWith(`-A ${chain} `)) >>> 0, 0, ["-A", chain, ...rest.slice(1)].join(" "));
      return { code: 0, stdout: "", stderr: "" };
    }
    if (verb === "-C")
      return table.includes(["-A", chain, ...rest].join(" ")) ? { code: 0, stdout: "", stderr: "" } : { code: 1, stdout: "", stderr: "Bad rule" };
    return { code: 0, stdout: "", stderr: "" };
  };
  return { run, ran };
}

describe("IptablesFirewall", () => {
  it("installs both chains in one restore per family and jumps to them first in DOCKER-USER and INPUT", async () => {
    const { run, ran } = scripted();
    expect(await new IptablesFirewall(policy, run).ensure()).toEqual({ changed: true });
    expect(ran.filter((line) => /restore|-I /.test(line))).toEqual([
      "iptables-restore --noflush",
      "iptables -I DOCKER-USER 1 -i cm-+ -j CM-EGRESS",
      "iptables -I INPUT 1 -i cm-+ -j CM-INPUT",
      "ip6tables-restore --noflush",
      "ip6tables -I FORWARD 1 -i cm-+ -j CM-EGRESS",
      "ip6tables -I INPUT 1 -i cm-+ -j CM-INPUT",
    ]);
  });

  it("checks an installed policy with one listing per family, and finds nothing to change", async () => {
    const { run, ran } = scripted();
    const firewall = new IptablesFirewall(policy, run);
    await firewall.ensure();
    ran.length = 0;
    expect(await firewall.ensure()).toEqual({ changed: false });
    expect(await firewall.check()).toEqual([]);
    expect(ran).toEqual(["iptables -S", "ip6tables -S", "iptables -S", "ip6tables -S"]);
  });

  it("puts back a jump someone deleted, and a chain someone flushed", async () => {
    let deleted = false;
    const { run, ran } = scripted();
    const firewall = new IptablesFirewall(policy, async (command, args, input) => {
      if (deleted && args.includes("-C") && args.includes("CM-INPUT")) return { code: 1, stdout: "", stderr: "Bad rule" };
      const result = await run(command, args, input);
      if (deleted && command === "iptables" && args.at(-1) === "-S")
        result.stdout = result.stdout
          .split("\n")
          .filter((rule) => rule !== "-A INPUT -i cm-+ -j CM-INPUT" && !rule.startsWith("-A CM-EGRESS "))
          .join("\n");
      return result;
    });
    await firewall.ensure();
    deleted = true;
    expect(await firewall.check()).toEqual(["iptables: chain CM-EGRESS holds other rules than the policy's", "iptables: INPUT does not jump to CM-INPUT"]);
    ran.length = 0;
    expect(await firewall.ensure()).toEqual({ changed: true });
    expect(ran.filter((line) => /restore/.test(line))).toEqual(["iptables-restore --noflush"]);
  });

  it("fails when Docker keeps no DOCKER-USER chain (nothing would isolate tenants)", async () => {
    const { run } = scripted((line) => (line === "iptables -S" ? { stdout: "-P INPUT ACCEPT\n-P FORWARD ACCEPT\n" } : undefined));
    await expect(new IptablesFirewall(policy, run).ensure()).rejects.toThrow(
      "iptables has no DOCKER-USER chain: is Docker running, with its iptables option on?",
    );
  });

  it("fails when iptables is not installed", async () => {
    const { run } = scripted((line) => (line.startsWith("iptables") || line.startsWith("ip6tables") ? { code: 127 } : undefined));
    await expect(new IptablesFirewall(policy, run).ensure()).rejects.toThrow("iptables is not installed");
    expect(await new IptablesFirewall(policy, run).check()).toEqual(["iptables is not installed"]);
  });

  it("goes on without the IPv6 rules where Docker has no IPv6 tables, and says so when checked", async () => {
    const { run } = scripted((line) => (line === "ip6tables-restore --noflush" ? { code: 2, stderr: "ip6tables-restore: line 2 failed" } : undefined));
    const firewall = new IptablesFirewall(policy, run);
    await expect(firewall.ensure()).resolves.toEqual({ changed: true });
    expect(await firewall.check()).toContain("ip6tables: chain CM-EGRESS is missing");
  });

  it("says what it cannot do when removing without root", async () => {
    const { run } = scripted((line) =>
      line === "iptables -S INPUT"
        ? { code: 4, stderr: "iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)" }
        : undefined,
    );
    await expect(new IptablesFirewall(policy, run).remove()).rejects.toThrow(/Permission denied \(you must be root\)/);
  });
});

describe("filterTable", () => {
  it("reads chains, built-in or not, and their rules in order from iptables -S", () => {
    const table = filterTable(
      [
        "-P INPUT ACCEPT",
        "-N DOCKER-USER",
        "-N CM-EGRESS",
        "-A INPUT -i cm-+ -j CM-INPUT",
        '-A CM-EGRESS -m comment --comment "cm-egress abc" -j RETURN',
        "-A CM-EGRESS -j DROP",
        "",
      ].join("\n"),
    );
    expect([...table.keys()]).toEqual(["INPUT", "DOCKER-USER", "CM-EGRESS"]);
    expect(table.get("DOCKER-USER")).toEqual([]);
    expect(table.get("CM-EGRESS")).toEqual(['-A CM-EGRESS -m comment --comment "cm-egress abc" -j RETURN', "-A CM-EGRESS -j DROP"]);
  });
});
