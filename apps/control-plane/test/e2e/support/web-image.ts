// A test image with a real HTTP and WebSocket server: node and its shared
// libraries copied from this machine into a busybox rootfs, imported with
// `docker import` (no registry here).
import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { imageExists } from "../../../../agent/test/support/busybox-image";

export const WEB_IMAGE = "cm-test-web:7";

export function ensureWebImage(): string {
  if (imageExists(WEB_IMAGE)) return WEB_IMAGE;
  const root = mkdtempSync(path.join(tmpdir(), "cm-web-rootfs-"));
  try {
    const put = (from: string, to = from) => {
      mkdirSync(path.join(root, path.dirname(to)), { recursive: true });
      copyFileSync(from, path.join(root, to));
    };
    mkdirSync(path.join(root, "bin"), { recursive: true });
    put("/bin/busybox");
    for (const applet of ["sh", "cat", "echo", "sleep", "ls"]) symlinkSync("busybox", path.join(root, "bin", applet));
    const node = realpathSync(process.execPath);
    put(node, "/bin/node");
    // ldd names the shared libraries node needs, and the loader itself.
    for (const line of execFileSync("ldd", [node], { encoding: "utf8" }).split("\n")) {
      const lib = /=>\s*(\S+)/.exec(line)?.[1] ?? /^\s*(\/\S+)/.exec(line)?.[1];
      if (lib && lib.startsWith("/")) put(lib);
    }
    put(path.join(import.meta.dirname, "web-server.mjs"), "/app/server.mjs");
    const require = createRequire(import.meta.url);
    cpSync(path.dirname(require.resolve("ws/package.json")), path.join(root, "app/node_modules/ws"), { recursive: true });
    execFileSync("sh", ["-c", `tar -C ${root} -c . | docker import -c 'ENV PATH=/bin' -c 'EXPOSE 8080' -c 'CMD ["node", "/app/server.mjs"]' - ${WEB_IMAGE}`], {
      stdio: "ignore",
    });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return WEB_IMAGE;
}
