// IptablesFirewall's decisions against scripted iptables answers: what makes it
// fail, and what it only notes. The commands' real effect is in firewall.test.ts.
import { describe, expect, it } from "vitest";
import type { CommandResult, CommandRunner } from "../../src/egress/command";
import { IptablesFirewall } from "../../src/egress/iptables";
import type { EgressPolicy } from "../../src/egress/policy";

const policy: EgressPolicy = { interfacePrefix: "cm-", egressChain: "CM-EGRESS", inputChain: "CM-INPUT", allow: [], resolvers: [] };

/** Nothing installed yet; `answer` overrides per command line (without the -w 5). */
function scripted(answer: (line: string) => Partial<CommandResult> | undefined): { run: CommandRunner; ran: string[] } {
  const ran: string[] = [];
  const run: CommandRunner = async (command, args) => {
    const line = [command, ...args.filter((arg, i) => !(arg === "-w" || args[i - 1] === "-w"))].join(" ");
    ran.push(line);
    const given = answer(line);
    if (given) return { code: 0, stdout: "", stderr: "", ...given };
    if (/ -S (CM-|DOCKER-USER)/.test(line) && line.startsWith("ip6tables")) return { code: 1, stdout: "", stderr: "No chain/target/match by that name." };
    if (/ -S CM-/.test(line) || / -C /.test(line)) return { code: 1, stdout: "", stderr: "No chain/target/match by that name." };
    return { code: 0, stdout: "", stderr: "" };
  };
  return { run, ran };
}

describe("IptablesFirewall", () => {
  it("installs both chains in one restore per family and jumps to them first in DOCKER-USER and INPUT", async () => {
    const { run, ran } = scripted(() => undefined);
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

  it("fails when Docker keeps no DOCKER-USER chain (nothing would isolate tenants)", async () => {
    const { run } = scripted((line) => (line === "iptables -S DOCKER-USER" ? { code: 1, stderr: "iptables: No chain/target/match by that name." } : undefined));
    await expect(new IptablesFirewall(policy, run).ensure()).rejects.toThrow(
      "iptables has no DOCKER-USER chain (iptables: No chain/target/match by that name.): is Docker running, with its iptables option on?",
    );
  });

  it("fails when iptables is not installed", async () => {
    const { run } = scripted((line) => (line.startsWith("iptables") || line.startsWith("ip6tables") ? { code: 127 } : undefined));
    await expect(new IptablesFirewall(policy, run).ensure()).rejects.toThrow("iptables is not installed");
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
