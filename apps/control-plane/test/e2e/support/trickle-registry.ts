// A registry that answers the Docker registry API (v2) on the loopback with one
// image whose one layer it sends a byte at a time, every `byteEveryMs`: the
// hostile registry that held a node for 19 minutes. It records each layer
// download, open or closed, so a test sees whether the node's Docker is still
// downloading. Docker treats 127.0.0.0/8 as an insecure registry: plain HTTP.
import { createHash, randomBytes } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

const sha256 = (data: Buffer | string) => `sha256:${createHash("sha256").update(data).digest("hex")}`;

export type TrickleRegistry = Awaited<ReturnType<typeof startTrickleRegistry>>;

export async function startTrickleRegistry({ byteEveryMs = 2_000, realm }: { byteEveryMs?: number; realm?: string } = {}) {
  // Never sent whole, so its bytes need not be a real layer; the sizes and digests are consistent.
  const layer = randomBytes(4 * 1024 * 1024);
  const config = Buffer.from(
    JSON.stringify({ architecture: "amd64", os: "linux", config: { Cmd: ["sleep", "600"] }, rootfs: { type: "layers", diff_ids: [sha256(layer)] } }),
  );
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.docker.distribution.manifest.v2+json",
      config: { mediaType: "application/vnd.docker.container.image.v1+json", size: config.length, digest: sha256(config) },
      layers: [{ mediaType: "application/vnd.docker.image.rootfs.diff.tar.gzip", size: layer.length, digest: sha256(layer) }],
    }),
  );
  const downloads: Array<{ open: boolean; bytesSent: number }> = [];
  const requests: string[] = [];
  const timers = new Set<NodeJS.Timeout>();

  const send = (res: ServerResponse, type: string, body: Buffer, head: boolean) => {
    res.writeHead(200, { "content-type": type, "content-length": body.length, "docker-content-digest": sha256(body) });
    res.end(head ? undefined : body);
  };
  const server = createServer((req, res) => {
    const url = req.url ?? "";
    const head = req.method === "HEAD";
    requests.push(url);
    // With a realm, every request is challenged for a token from there, as a registry with a token service does.
    if (realm) return res.writeHead(401, { "www-authenticate": `Bearer realm="${realm}",service="trickle"` }).end();
    if (url === "/v2/" || url === "/v2") return send(res, "application/json", Buffer.from("{}"), head);
    if (/^\/v2\/.+\/manifests\/[^/]+$/.test(url)) return send(res, "application/vnd.docker.distribution.manifest.v2+json", manifest, head);
    if (url.endsWith(`/blobs/${sha256(config)}`)) return send(res, "application/octet-stream", config, head);
    if (url.endsWith(`/blobs/${sha256(layer)}`)) {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": layer.length, "docker-content-digest": sha256(layer) });
      if (head) return res.end();
      const download = { open: true, bytesSent: 0 };
      downloads.push(download);
      const timer = setInterval(() => {
        if (download.bytesSent < layer.length) res.write(layer.subarray(download.bytesSent, ++download.bytesSent));
      }, byteEveryMs);
      timers.add(timer);
      res.on("close", () => {
        download.open = false;
        clearInterval(timer);
        timers.delete(timer);
      });
      return;
    }
    res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ errors: [{ code: "NAME_UNKNOWN", message: "unknown" }] }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    /** host:port, as image references name it */
    address,
    /** every download of the layer so far: open while the node's Docker still reads it */
    downloads,
    /** the path of every request, in order */
    requests,
    async close() {
      for (const timer of timers) clearInterval(timer);
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
