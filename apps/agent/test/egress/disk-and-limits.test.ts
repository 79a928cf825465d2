// A deployment's disk and the limits that stay on, through the agent's own
// reconciler on the real Docker engine: the container is made the way the
// control plane's sync makes it, then measured and inspected.
import type { DeploymentSpec } from "@cm/protocol";
import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect } from "vitest";
import { systemClock } from "../../src/clock";
import { parseAgentConfig } from "../../src/config";
import { BYTES_PER_GB, DiskWatcher } from "../../src/disk/disk-watcher";
import { silentLogger } from "../../src/logger";
import { LogShipping } from "../../src/logs/log-shipping";
import { Reconciler } from "../../src/reconcile/reconciler";
import { StatusReporter } from "../../src/reconcile/status-reporter";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { dockerTestRun } from "../support/docker-test-run";
import { eventually } from "../support/eventually";
import { ensureScriptImage } from "../support/script-image";

const run = dockerTestRun();
const runtime = new DockerRuntime({ docker: run.docker, sandboxPool: 0 });
const timing = parseAgentConfig({ controlPlaneUrl: "ws://control-plane.invalid", token: "t" }).timing;
const NODE_ID = "node-disk";
/** what the control plane would have been told, in order */
const statuses: Array<{ deploymentId: string; status: string; reason?: string }> = [];
const reporter = new StatusReporter(
  {
    reliable: (frame) =>
      void (
        frame.type === "status" && statuses.push({ deploymentId: frame.deploymentId, status: frame.status, ...(frame.reason ? { reason: frame.reason } : {}) })
      ),
    unreliable: () => true,
  },
  systemClock,
);
const watcherOptions = {
  disk: runtime,
  dataRoot: async () => (await runtime.engineInfo()).dataRoot,
  reserveGb: 0,
  defaultGb: 20,
  checkMs: 200,
  clock: systemClock,
  logger: silentLogger,
  containerLabels: run.labels,
  stopDeployment: (deploymentId: string, containerId: string, reason: string) => reconciler.stopForPolicy(deploymentId, containerId, reason),
};
const watcher = new DiskWatcher(watcherOptions);
/** whose reserve new deployments are admitted by; one test swaps in a fuller disk */
let admission = watcher;
const reconciler: Reconciler = new Reconciler({
  runtime,
  reporter,
  logs: new LogShipping({ runtime, send: () => true, clock: systemClock, logger: silentLogger, timing }),
  clock: systemClock,
  logger: silentLogger,
  containerLabels: run.labels,
  containerStopTimeoutS: 1,
  nodeFacts: async () => ({ gpus: [], cpuThreads: 2, ramMb: 4096 }),
  canShipLogs: () => false,
  admit: (spec) => admission.admit(spec.diskGb),
  diskDefaultGb: 20,
});

let image = "";
function spec(suffix: string, script: string, extra: Partial<DeploymentSpec> = {}): DeploymentSpec {
  return {
    deploymentId: run.deploymentId(suffix),
    userId: "user-disk",
    runSeq: 1,
    desiredState: "running",
    image,
    env: { SCRIPT: script },
    ports: [],
    gpuCount: 0,
    memoryMb: 256,
    logCursor: { seq: 0, dockerTs: null },
    ...extra,
  };
}

const dockerTests = needs("docker", "busybox");

dockerTests.describe("a deployment's disk and limits", () => {
  beforeAll(() => {
    image = ensureScriptImage();
    reconciler.setNodeId(NODE_ID);
  }, 60_000);
  afterAll(async () => {
    watcher.stop();
    reconciler.stop();
    await run.cleanup();
  }, 60_000);

  dockerTests.it(
    "stops a deployment that writes past its allowance, telling the tenant why",
    async () => {
      // 10 MB allowed (the wire carries whole GB; the agent takes any positive number), 30 MB written.
      const writer = spec("writer", "dd if=/dev/zero of=/tmp/fill bs=1M count=30 2>/dev/null; sleep 3600", { diskGb: 0.01 });
      const modest = spec("modest", "dd if=/dev/zero of=/tmp/fill bs=1M count=1 2>/dev/null; sleep 3600", { diskGb: 0.01 });
      await reconciler.sync([writer, modest]);
      expect(reconciler.running()).toEqual([modest.deploymentId, writer.deploymentId].sort());
      watcher.start();
      const stopped = await eventually(
        async () => statuses.find((s) => s.deploymentId === writer.deploymentId && s.status === "failed"),
        30_000,
        "the writer stopped",
      );
      expect(stopped.reason).toMatch(/^the container wrote 0\.03 GB to its disk, past its allowance of 0\.01 GB, and was stopped$/);
      expect(reconciler.running()).toEqual([modest.deploymentId]);
      const [container] = await runtime.listManaged({ ...run.labels, "cm.deployment-id": writer.deploymentId });
      expect(container?.running).toBe(false);
      // Stopped on purpose: no crash report follows.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(statuses.filter((s) => s.deploymentId === writer.deploymentId).map((s) => s.status)).toEqual(["starting", "running", "failed"]);
      watcher.stop();
    },
    60_000,
  );

  dockerTests.it(
    "refuses a new deployment when the disk would fall below the node's reserve",
    async () => {
      const free = await runtime.freeBytes((await runtime.engineInfo()).dataRoot);
      // The whole free space kept for the machine.
      admission = new DiskWatcher({ ...watcherOptions, reserveGb: Math.ceil(free / BYTES_PER_GB) });
      try {
        const refused = spec("refused", "sleep 3600", { diskGb: 1 });
        await reconciler.sync([refused]);
        const report = statuses.find((s) => s.deploymentId === refused.deploymentId);
        expect(report?.status).toBe("failed");
        expect(report?.reason).toMatch(/^this node has [\d.]+ GB of disk free, not enough for the deployment's 1 GB beside the \d+ GB it keeps for itself$/);
        expect(await runtime.listManaged({ ...run.labels, "cm.deployment-id": refused.deploymentId })).toEqual([]);
      } finally {
        admission = watcher;
      }
    },
    60_000,
  );

  dockerTests.it(
    "creates the container with the limits on",
    async () => {
      const limited = spec("limits", "sleep 3600", { diskGb: 5 });
      await reconciler.sync([limited]);
      const [state] = await runtime.listManaged({ ...run.labels, "cm.deployment-id": limited.deploymentId });
      const info = await run.docker.getContainer(state!.id).inspect();
      const host = info.HostConfig;
      // Docker's default seccomp profile: nothing names another, or "unconfined".
      expect((host.SecurityOpt ?? []).filter((opt: string) => /seccomp|apparmor=unconfined|label=disable/.test(opt))).toEqual([]);
      expect(host.SecurityOpt).toContain("no-new-privileges");
      expect(host.Privileged).toBe(false);
      expect(host.CapDrop).toEqual(["ALL"]);
      expect(host.CapAdd).not.toContain("SYS_ADMIN");
      expect(host.CapAdd).not.toContain("NET_RAW");
      expect(host.PidsLimit).toBe(1024);
      expect(host.Ulimits).toEqual([{ Name: "nofile", Soft: 16_384, Hard: 16_384 }]);
      expect(host.IpcMode).toBe("private");
      expect(host.PidMode ?? "").toBe("");
      expect(host.UTSMode ?? "").toBe("");
      expect(host.ShmSize).toBe(64 * 1024 * 1024); // a quarter of 256 MB
      expect(host.Memory).toBe(256 * 1024 * 1024);
      expect(info.Config.Labels["cm.disk-gb"]).toBe("5");
      // And as the container sees itself: its seccomp filter on, its open-files limit, its /dev/shm.
      const seen = await execIn(state!.id, "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status; ulimit -n; df -m /dev/shm | tail -1");
      expect(seen).toMatch(/NoNewPrivs:\s+1/);
      expect(seen).toMatch(/Seccomp:\s+2/);
      expect(seen).toMatch(/\n16384\n/);
      expect(seen).toMatch(/shm\s+64\s/);
    },
    60_000,
  );

  dockerTests.it(
    "stamps a custom image's container with the node's default allowance, the one the tenant is shown",
    async () => {
      const custom = spec("custom", "sleep 3600"); // no diskGb: a custom image's spec
      await reconciler.sync([custom]);
      const [state] = await runtime.listManaged({ ...run.labels, "cm.deployment-id": custom.deploymentId });
      const info = await run.docker.getContainer(state!.id).inspect();
      expect(info.Config.Labels["cm.disk-gb"]).toBe("20");
    },
    60_000,
  );
});

async function execIn(containerId: string, script: string): Promise<string> {
  const exec = await run.docker.getContainer(containerId).exec({ Cmd: ["sh", "-c", script], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", resolve);
    stream.on("error", reject);
  });
  // Docker's multiplexed frames: an 8-byte header before each.
  const all = Buffer.concat(chunks);
  let text = "";
  for (let at = 0; at + 8 <= all.length; ) {
    const size = all.readUInt32BE(at + 4);
    text += all.subarray(at + 8, at + 8 + size).toString("utf8");
    at += 8 + size;
  }
  return text;
}
