import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { terminal } from "./support/cli";

// `cm ssh` where no ssh client is installed: it prints the ssh command line it
// would run (cm port-forward --stdio as the ProxyCommand), to run elsewhere.

const t = terminal();
// A PATH with node (tsx needs it) and no ssh.
const bin = join(t.home, "bin");
mkdirSync(bin);
symlinkSync(process.execPath, join(bin, "node"));
afterAll(() => t.close());

it("prints the ssh line with cm port-forward --stdio as its ProxyCommand when ssh is absent, and exits 1", async () => {
  const r = await t.cm(["--api", "http://127.0.0.1:9", "ssh", "dep_abc", "--port", "2222", "--user", "ubuntu", "--", "-i", "my key"], { PATH: bin });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain("no ssh client here");
  const line = r.stdout.trim();
  expect(line).toMatch(/^ssh -o 'ProxyCommand=.+ --api http:\/\/127\.0\.0\.1:9 --keypair \S+ port-forward dep_abc --stdio 2222' /);
  expect(line).toMatch(/ -o ServerAliveInterval=60 -o HostKeyAlias=cm-dep_abc -i 'my key' ubuntu@dep_abc$/);
});
