import { execFile, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describeEachDatabase, needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { imageExists } from "../../agent/test/support/busybox-image";
import { ensureScriptImage } from "../../agent/test/support/script-image";
import { type System, startSystem, until } from "../../control-plane/test/e2e/support/system";
import { ensureWebImage } from "../../control-plane/test/e2e/support/web-image";
import { terminal } from "./support/cli";

// `cm cp` as a tenant runs it, against a real control plane, a real agent and
// Docker: a directory with a binary file of a few MB goes into a busybox
// container and comes back identical, over the exec session's stdin and
// stdout and the container's own tar; and the errors a tenant meets.

const execFileP = promisify(execFile);
const sha256 = (file: string) => createHash("sha256").update(fs.readFileSync(file)).digest("hex");

/** Every file under `dir`: relative path -> sha256 and mode (directories: their mode). */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (abs: string, rel: string) => {
    for (const name of fs.readdirSync(abs).sort()) {
      const a = path.join(abs, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(a);
      if (st.isSymbolicLink()) out[r] = `-> ${fs.readlinkSync(a)}`;
      else if (st.isDirectory()) walk(a, r);
      else out[r] = `${sha256(a)} ${(st.mode & 0o777).toString(8)}`;
    }
  };
  walk(dir, "");
  return out;
}

const NO_TAR_IMAGE = "cm-test-no-tar:latest";

/** An image with a shell (dash) and sleep but no tar: busybox's shell finds its own tar even where /bin/tar is gone. */
function ensureNoTarImage(): string {
  if (imageExists(NO_TAR_IMAGE)) return NO_TAR_IMAGE;
  const rootfs = fs.mkdtempSync(path.join(os.tmpdir(), "cm-no-tar-rootfs-"));
  try {
    fs.chmodSync(rootfs, 0o755);
    for (const [from, to] of [
      ["/bin/dash", "/bin/sh"],
      ["/bin/sleep", "/bin/sleep"],
    ] as const) {
      const libs = execFileSync("ldd", [from], { encoding: "utf8" }).match(/\/\S+/g) ?? [];
      for (const lib of [...libs, from]) {
        const dest = path.join(rootfs, lib === from ? to : lib);
        fs.mkdirSync(path.dirname(dest), { recursive: true });
        fs.copyFileSync(fs.realpathSync(lib), dest);
        fs.chmodSync(dest, 0o755);
      }
    }
    fs.mkdirSync(path.join(rootfs, "tmp"));
    execFileSync("sh", ["-c", `tar -C "${rootfs}" -c . | docker import -c 'CMD ["/bin/sleep", "3600"]' - ${NO_TAR_IMAGE}`], { stdio: "ignore" });
  } finally {
    fs.rmSync(rootfs, { recursive: true, force: true });
  }
  return NO_TAR_IMAGE;
}

needs("docker", "busybox").describe("cm cp with a real agent and Docker", () => {
  describeEachDatabase("on $name", (db) => {
    let s: System;
    let t: ReturnType<typeof terminal>;
    let id = "";
    let here = "";
    let src = "";

    const deploy = async (args: string[]) => {
      const r = await t.cm(["deploy", "--node", s.nodeId, "--wait", ...args]);
      expect(r.code, r.stderr).toBe(0);
      return r.stdout.trim();
    };

    beforeAll(async () => {
      ensureScriptImage();
      s = await startSystem(db);
      await s.agent().start();
      t = terminal({ CM_API_URL: s.h.url });
      t.keypair();
      expect((await t.cm(["login"])).code).toBe(0);
      await s.h.grantCredits(JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.id, 1_000);
      await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
      id = await deploy(["--image", ensureScriptImage(), "--env", "SCRIPT=sleep 3600"]);

      here = fs.mkdtempSync(path.join(os.tmpdir(), "cm-cp-"));
      src = path.join(here, "data");
      fs.mkdirSync(path.join(src, "nested/deeper"), { recursive: true });
      // Every byte value, newlines and NULs included, in a few MB.
      fs.writeFileSync(path.join(src, "weights.bin"), Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(4 * 1024 * 1024 + 3)]));
      fs.writeFileSync(path.join(src, "nested/run.sh"), "#!/bin/sh\necho hi\n", { mode: 0o755 });
      fs.writeFileSync(path.join(src, "nested/deeper/empty"), "");
      const long = path.join(src, `${"long-directory-name/".repeat(6)}and-a-long-file-name.txt`);
      fs.mkdirSync(path.dirname(long), { recursive: true });
      fs.writeFileSync(long, "far down\n");
      fs.symlinkSync("nested/run.sh", path.join(src, "link"));
    }, 180_000);
    afterAll(async () => {
      t?.close();
      await s?.close();
      if (here) fs.rmSync(here, { recursive: true, force: true });
    }, 60_000);

    it("copies a directory with a binary file into the container and back, identical", async () => {
      const up = await t.cm(["cp", src, `${id}:/tmp`]);
      // What it copied, on stderr: the regular files (the link apart) and their bytes, and where they went.
      const bytes = 256 + 4 * 1024 * 1024 + 3 + "#!/bin/sh\necho hi\n".length + "far down\n".length;
      expect(up, up.stderr).toMatchObject({ code: 0, stdout: "", stderr: `copied 4 files, 1 link, ${bytes} bytes from ${src} to ${id}:/tmp/data\n` });
      // The container's own view of the bytes: its sha256sum of what its tar wrote.
      const inside = await t.cm(["exec", id, "--", "sha256sum", "/tmp/data/weights.bin"]);
      expect(inside.stdout.split(" ")[0]).toBe(sha256(path.join(src, "weights.bin")));
      expect((await t.cm(["exec", id, "--", "cat", "/tmp/data/link"])).stdout).toBe("#!/bin/sh\necho hi\n");

      const back = path.join(here, "back");
      const down = await t.cm(["cp", `${id}:/tmp/data`, back]);
      expect(down, down.stderr).toMatchObject({ code: 0, stdout: "", stderr: `copied 4 files, 1 link, ${bytes} bytes from ${id}:/tmp/data to ${back}\n` });
      expect(tree(back)).toEqual(tree(src));

      // Into a directory that exists: under its own name, as docker cp does.
      fs.mkdirSync(path.join(here, "into"));
      expect((await t.cm(["cp", `${id}:/tmp/data/nested`, path.join(here, "into")])).stderr).toBe(
        `copied 2 files, 18 bytes from ${id}:/tmp/data/nested to ${path.join(here, "into/nested")}\n`,
      );
      expect(tree(path.join(here, "into/nested"))).toEqual(tree(path.join(src, "nested")));
    }, 120_000);

    it("copies a single file to a new name both ways, and a tar stream with -", async () => {
      const file = path.join(src, "weights.bin");
      expect((await t.cm(["cp", file, `${id}:/tmp/renamed.bin`])).code).toBe(0);
      const back = path.join(here, "renamed-back.bin");
      expect((await t.cm(["cp", `${id}:/tmp/renamed.bin`, back])).code).toBe(0);
      expect(sha256(back)).toBe(sha256(file));
      // `cm cp ID:PATH -` is the container's tar on stdout.
      // Not execFileSync: the control plane and agent run in this process and must go on answering.
      const { stdout: listed } = await execFileP("sh", ["-c", `"$0" "$1" cp "$2" - | tar -t`, ...cmArgv(), `${id}:/tmp/data/nested`], {
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: path.join(t.home, ".config"), CM_API_URL: s.h.url },
      });
      expect(listed.split("\n").filter(Boolean).sort()).toEqual(["nested/", "nested/deeper/", "nested/deeper/empty", "nested/run.sh"]);
    }, 120_000);

    it("says what is wrong: no such path here or in the container, a directory onto a file", async () => {
      expect(await t.cm(["cp", `${id}:/no/such/path`, path.join(here, "x")])).toMatchObject({
        code: 1,
        stderr: "error NO_SUCH_PATH: no such file or directory in the container: /no/such/path\n",
      });
      expect(await t.cm(["cp", path.join(src, "weights.bin"), `${id}:/no/such/dir/w.bin`])).toMatchObject({
        code: 1,
        stderr: "error NO_SUCH_PATH: no such directory in the container: /no/such/dir\n",
      });
      expect(await t.cm(["cp", path.join(here, "nothing"), `${id}:/tmp`])).toMatchObject({
        code: 1,
        stderr: `error NO_SUCH_PATH: no such file or directory here: ${path.join(here, "nothing")}\n`,
      });
      expect(await t.cm(["cp", src, `${id}:/tmp/renamed.bin`])).toMatchObject({
        code: 1,
        stderr: `error NOT_A_DIRECTORY: cannot copy directory ${src} onto /tmp/renamed.bin, a file in the container\n`,
      });
      expect((await t.cm(["cp", src, path.join(here, "y")])).code).toBe(2);
    }, 120_000);

    it("never writes through a link an earlier copy left: the second copy of a container's link replaces it", async () => {
      // The tenant's ~/.ssh, which a container's link names by its absolute path.
      const ssh = path.join(here, "home/.ssh");
      fs.mkdirSync(ssh, { recursive: true, mode: 0o700 });
      fs.writeFileSync(path.join(ssh, "authorized_keys"), "mine\n", { mode: 0o600 });
      const sh = async (script: string) => expect((await t.cm(["exec", id, "--", "sh", "-c", script])).code).toBe(0);
      await sh(`mkdir -p /workspace && ln -sfn '${ssh}' /workspace/results`);
      const into = path.join(here, "downloads");
      fs.mkdirSync(into);
      const first = await t.cm(["cp", `${id}:/workspace/results`, into]);
      expect(first, first.stderr).toMatchObject({
        code: 0,
        stderr: `copied 0 files, 1 link, 0 bytes from ${id}:/workspace/results to ${path.join(into, "results")}\n`,
      });
      expect(fs.readlinkSync(path.join(into, "results"))).toBe(ssh);

      await sh(
        "rm /workspace/results && mkdir -m 777 /workspace/results && echo evil > /workspace/results/authorized_keys && chmod 666 /workspace/results/authorized_keys",
      );
      const second = await t.cm(["cp", `${id}:/workspace/results`, into]);
      expect(second, second.stderr).toMatchObject({
        code: 0,
        stderr: `copied 1 file, 5 bytes from ${id}:/workspace/results to ${path.join(into, "results")}\n`,
      });
      expect(fs.readFileSync(path.join(ssh, "authorized_keys"), "utf8")).toBe("mine\n");
      expect(fs.statSync(ssh).mode & 0o777).toBe(0o700);
      expect(fs.lstatSync(path.join(into, "results")).isDirectory()).toBe(true);
      expect(fs.readFileSync(path.join(into, "results/authorized_keys"), "utf8")).toBe("evil\n");

      // Named as the destination itself, a link is refused rather than followed.
      fs.symlinkSync(ssh, path.join(here, "named-link"));
      expect(await t.cm(["cp", `${id}:/workspace/results`, path.join(here, "named-link")])).toMatchObject({
        code: 1,
        stderr: `error DESTINATION_IS_A_LINK: ${path.join(here, "named-link")} is a symbolic link (to ${ssh}): cm cp never writes through a link; name the directory itself, or remove the link\n`,
      });
      expect(fs.readdirSync(ssh)).toEqual(["authorized_keys"]);
    }, 120_000);

    it("copies into an image whose busybox has tar only as its shell's applet (no /bin/tar)", async () => {
      const web = await deploy(["--image", ensureWebImage()]);
      const file = path.join(src, "nested/run.sh");
      const up = await t.cm(["cp", file, `${web}:/app/run.sh`]);
      expect(up, up.stderr).toMatchObject({ code: 0, stderr: `copied 1 file, 18 bytes from ${file} to ${web}:/app/run.sh\n` });
      const back = path.join(here, "from-web.sh");
      expect((await t.cm(["cp", `${web}:/app/run.sh`, back])).code).toBe(0);
      expect(fs.readFileSync(back, "utf8")).toBe("#!/bin/sh\necho hi\n");
    }, 120_000);

    it("says so when the image has no tar, and when the deployment is not running", async () => {
      const bare = await deploy(["--image", ensureNoTarImage()]);
      const r = await t.cm(["cp", path.join(src, "nested/run.sh"), `${bare}:/tmp`]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^error NO_TAR: the container has no tar: cm cp runs the container's tar/);
      expect((await t.cm(["cp", `${bare}:/bin/sh`, path.join(here, "sh")])).stderr).toMatch(/^error NO_TAR: /);

      expect((await t.cm(["stop", bare])).code).toBe(0);
      await until("stopped", async () => (await s.h.deps.repos.deployments.get(bare))?.status === "stopped");
      expect(await t.cm(["cp", path.join(src, "nested/run.sh"), `${bare}:/tmp`])).toMatchObject({
        code: 1,
        stderr: `error DEPLOYMENT_NOT_RUNNING: deployment ${bare} is stopped: cm cp copies into a running deployment only; start it first (cm start ${bare}). Copying out works in any state while its container is kept\n`,
      });
    }, 180_000);

    /** How the test runs cm from a shell: tsx and the entry, as support/cli does. */
    const cmArgv = () => [path.resolve(import.meta.dirname, "../../../node_modules/.bin/tsx"), path.resolve(import.meta.dirname, "../src/index.ts")];
  });
});
