// A real container registry for the private-image tests: Debian's docker-registry
// (distribution 2.8) on the loopback with htpasswd (bcrypt) logins and storage in
// a temporary directory. Docker treats 127.0.0.0/8 registries as insecure, so
// plain HTTP needs no daemon setting. The docker CLI logs in with a config
// directory of its own: the host's ~/.docker is never read or written.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { runProgram } from "@cm/testkit/run-program";

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export type Registry = Awaited<ReturnType<typeof startRegistry>>;

export async function startRegistry(login: { username: string; password: string }) {
  const dir = mkdtempSync(path.join(tmpdir(), "cm-registry-"));
  writeFileSync(path.join(dir, "htpasswd"), await runProgram("htpasswd", ["-Bbn", login.username, login.password]));
  let child: ChildProcess | undefined;
  let address = "";
  // A port picked free may be taken before the registry binds it: try another.
  for (let attempt = 0; attempt < 5 && !child; attempt++) {
    address = `127.0.0.1:${await freePort()}`;
    writeFileSync(
      path.join(dir, "config.yml"),
      [
        "version: 0.1",
        "log: { level: warn }",
        `storage: { filesystem: { rootdirectory: ${path.join(dir, "data")} } }`,
        `http: { addr: "${address}", secret: cm-test }`,
        `auth: { htpasswd: { realm: cm-test, path: ${path.join(dir, "htpasswd")} } }`,
        "",
      ].join("\n"),
    );
    const started = spawn("docker-registry", ["serve", path.join(dir, "config.yml")], { stdio: "ignore" });
    if (await answers(address, started)) child = started;
    else started.kill();
  }
  if (!child) throw new Error("docker-registry did not start");
  const registry = child;
  const dockerConfig = path.join(dir, "docker-config");
  const docker = (args: string[], input?: string) => runProgram("docker", args, { env: { ...process.env, DOCKER_CONFIG: dockerConfig }, input });

  return {
    /** host:port, as image references name it. */
    address,
    /** Pushes a local image as `<address>/<name>` with the login, then removes the local copy under that name. */
    async push(localImage: string, name: string): Promise<string> {
      const ref = `${address}/${name}`;
      await docker(["login", address, "--username", login.username, "--password-stdin"], login.password);
      await docker(["tag", localImage, ref]);
      await docker(["push", ref]);
      await docker(["rmi", ref]);
      await docker(["logout", address]);
      return ref;
    },
    close() {
      registry.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The registry answers /v2/ (401 without a login) before it is used; false when it exited first. */
async function answers(address: string, child: ChildProcess): Promise<boolean> {
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  for (let i = 0; i < 100 && !exited; i++) {
    try {
      const r = await fetch(`http://${address}/v2/`);
      if (r.status === 401) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}
