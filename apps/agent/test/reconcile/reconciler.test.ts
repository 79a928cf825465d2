// The reconciler over an in-memory engine and a fake clock: what the tenant's
// container looks like on the node and what the control plane is told, for
// starts, stops, restarts, removals and an agent restart. No Docker engine is
// needed; the same flows against real Docker are in test/agent/*.test.ts.
import { describe, expect, it } from "vitest";
import { REWATCH_DELAY_MS } from "../../src/reconcile/exit-watcher";
import { testGpu } from "../support/agent-harness";
import { dockerError } from "../support/memory-runtime";
import { CONTAINER_LABELS, IMAGE, NODE_ID, reconcilerHarness, spec } from "../support/reconciler-harness";

describe("starting a deployment", () => {
  it("runs the tenant's image with its env, ports and limits, labelled so a restarted agent can rebuild its state", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_web", { env: { MODEL: "llama" }, ports: [8080], cpuCores: 2, memoryMb: 4096 })]));

    const [container] = h.engine.ps();
    expect(h.engine.ps()).toHaveLength(1);
    expect(container!.state).toMatchObject({
      name: "cm-dep_web-run1",
      running: true,
      status: "running",
      deploymentId: "dep_web",
      nodeId: NODE_ID,
      userId: "usr_tenant",
      image: IMAGE,
    });
    expect(container!.spec).toMatchObject({ env: { MODEL: "llama" }, exposedPorts: [8080], cpuCores: 2, memoryMb: 4096, gpuDeviceIds: [] });
    expect(container!.state.labels).toMatchObject({
      ...CONTAINER_LABELS,
      "cm.managed": "true",
      "cm.deployment-id": "dep_web",
      "cm.node-id": NODE_ID,
      "cm.user-id": "usr_tenant",
      "cm.run-seq": "1",
      "cm.gpus": "",
    });
    expect(h.statuses("dep_web")).toEqual(["1:starting", "1:running"]);
    expect(h.engine.pulls).toEqual([]); // present already: never pulled again
    expect(h.reconciler.running()).toEqual(["dep_web"]);
  });

  it("without limits in the spec gives a CPU-only container a quarter of the node, as a weight and not a cap", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_share")]));
    expect(h.engine.container("cm-dep_share-run1").spec).toMatchObject({ cpuCores: 4, cpuLimit: "weight", memoryMb: Math.floor(65_536 * 0.9 * 0.25) });
  });

  it("caps the cores a spec names unless it says they are a default's weight", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_asked", { cpuCores: 0.1 }), spec("dep_default", { cpuCores: 0.04, cpuLimit: "weight" })]));
    expect(h.engine.container("cm-dep_asked-run1").spec).toMatchObject({ cpuCores: 0.1, cpuLimit: "quota" });
    expect(h.engine.container("cm-dep_default-run1").spec).toMatchObject({ cpuCores: 0.04, cpuLimit: "weight" });
  });

  it("pulls a missing image, telling the control plane it pulls and how far it got, then starts", async () => {
    const h = reconcilerHarness();
    h.engine.publish(IMAGE, { layers: 4, pullMs: 4_000 });
    const result = await h.settle(h.reconciler.command("create", spec("dep_pull")));

    expect(result).toEqual({ ok: true });
    expect(h.engine.pulls).toEqual([IMAGE]);
    expect(h.statuses("dep_pull")).toEqual(["1:pulling", "1:starting", "1:running"]);
    const progress = h.sent.filter((f) => f.type === "pull_progress");
    // At most one every 500 ms, and always the last.
    expect(progress.map((f) => f.type === "pull_progress" && f.layersDone)).toEqual([0, 1, 2, 3, 4]);
    const kinds = h.sent.filter((f) => f.type !== "logs").map((f) => (f.type === "status" ? f.status : f.type));
    expect(kinds.indexOf("pulling")).toBeLessThan(kinds.indexOf("pull_progress"));
    expect(kinds.lastIndexOf("pull_progress")).toBeLessThan(kinds.indexOf("starting"));
  });

  it("fails a deployment whose image cannot be pulled with a reason the tenant can read, and does not pull again on the next sync", async () => {
    const h = reconcilerHarness();
    const result = await h.settle(h.reconciler.command("create", spec("dep_typo", { image: "registry.example/nope:1" })));

    expect(result.ok).toBe(false);
    const failed = h.lastStatus("dep_typo");
    expect(failed).toMatchObject({ status: "failed", runSeq: 1 });
    expect(failed?.reason).toMatch(/^image "registry.example\/nope:1" is not present on this node and could not be pulled: pull access denied/);
    await h.settle(h.reconciler.sync([spec("dep_typo", { image: "registry.example/nope:1" })]));
    expect(h.engine.pulls).toHaveLength(1);
    expect(h.statuses("dep_typo")).toEqual(["1:pulling", "1:failed", "1:failed"]);
    expect(h.engine.ps()).toEqual([]);
  });

  it("leaves no container behind when the program cannot start, and says why", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE, { startError: 'exec: "python": executable file not found in $PATH' });
    const result = await h.settle(h.reconciler.command("create", spec("dep_noexec")));

    expect(result.ok).toBe(false);
    expect(h.lastStatus("dep_noexec")?.reason).toMatch(/^could not start the container: .*executable file not found in \$PATH/);
    expect(h.engine.ps()).toEqual([]);
  });

  it("says Docker's own words when it refuses to create the container", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE).failNext("createContainer", dockerError(500, "devmapper: Thin Pool has 0 free data blocks"));
    await h.settle(h.reconciler.command("create", spec("dep_full")));
    expect(h.lastStatus("dep_full")).toMatchObject({ status: "failed", reason: "could not create the container: devmapper: Thin Pool has 0 free data blocks" });
  });

  it("starts again, once, with another network sandbox when the one it joined ended before the start", async () => {
    const h = reconcilerHarness();
    const gone = (pid: number) =>
      dockerError(
        500,
        `OCI runtime create failed: container_linux.go:380: starting container process caused: namespace path: lstat /proc/${pid}/ns/net: no such file or directory: unknown`,
      );
    h.engine.loadImage(IMAGE).failNext("start", gone(4242));
    await h.settle(h.reconciler.command("create", spec("dep_sbx")));
    expect(h.lastStatus("dep_sbx")).toMatchObject({ status: "running" });
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_sbx-run1", true]]);
    // Docker's words when the sandbox container is already marked stopped (moby: 409).
    h.engine.failNext("start", dockerError(409, "cannot join network namespace of a non running container: container 3f2a is exited"));
    await h.settle(h.reconciler.command("create", spec("dep_sbx3")));
    expect(h.lastStatus("dep_sbx3")).toMatchObject({ status: "running" });

    // Twice in a row is not bad luck: the tenant is told.
    h.engine.failNext("start", gone(4243)).failNext("start", gone(4244));
    await h.settle(h.reconciler.command("start", spec("dep_sbx2")));
    expect(h.lastStatus("dep_sbx2")).toMatchObject({ status: "failed", reason: expect.stringMatching(/^could not start the container: .*namespace path/) });
    expect(h.engine.ps().map((c) => c.name)).toEqual(["cm-dep_sbx-run1", "cm-dep_sbx3-run1"]);
  });

  it("gives each deployment whole free GPUs, lowest index first, even when they start at the same time", async () => {
    const h = reconcilerHarness({ gpus: [3, 2, 1, 0].map(testGpu) });
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_a", { gpuCount: 2 }), spec("dep_b", { gpuCount: 1 }), spec("dep_c", { gpuCount: 2 })]));

    const gpusOf = (deploymentId: string) => h.engine.ps().find((c) => c.spec.deploymentId === deploymentId)?.spec.gpuDeviceIds;
    expect([gpusOf("dep_a"), gpusOf("dep_b")]).toEqual([["GPU-test-0", "GPU-test-1"], ["GPU-test-2"]]);
    expect(h.engine.container("cm-dep_a-run1").state.labels["cm.gpus"]).toBe("GPU-test-0,GPU-test-1");
    expect(h.lastStatus("dep_c")).toMatchObject({ status: "failed", reason: "this deployment needs 2 GPUs but only 1 of the node's 4 are free" });
    // A GPU frees up when its container ends.
    h.engine.exit("cm-dep_a-run1", 0);
    await h.settle(h.reconciler.command("start", spec("dep_c", { gpuCount: 2, runSeq: 2 })));
    expect(gpusOf("dep_c")).toEqual(["GPU-test-0", "GPU-test-1"]);
  });

  it("starts nothing when a stop arrives while the image is still being pulled", async () => {
    const h = reconcilerHarness();
    h.engine.publish(IMAGE, { layers: 2, pullMs: 5_000 });
    const creating = h.reconciler.command("create", spec("dep_changed_mind"));
    await h.clock.advance(1_000);
    const stopping = h.reconciler.command("stop", spec("dep_changed_mind"));
    expect(await h.settle(Promise.all([creating, stopping]))).toEqual([{ ok: true }, { ok: true }]);
    expect(h.engine.ps()).toEqual([]);
    expect(h.statuses("dep_changed_mind")).toEqual(["1:pulling", "1:stopped"]);
  });
});

describe("stopping a deployment", () => {
  it("sends SIGTERM, kills the container only once the stop timeout has passed, then reports it stopped (not crashed)", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE, { onSigterm: "ignore" });
    await h.settle(h.reconciler.sync([spec("dep_stubborn")]));
    const timeoutMs = h.timing.containerStopTimeoutS * 1000;

    let result: unknown;
    void h.reconciler.command("stop", spec("dep_stubborn")).then((r) => (result = r));
    await h.clock.advance(timeoutMs - 1);
    expect(h.engine.container("cm-dep_stubborn-run1")).toMatchObject({ signals: ["SIGTERM"], state: { running: true } });
    expect(result).toBeUndefined();
    expect(h.statuses("dep_stubborn")).toEqual(["1:starting", "1:running"]);

    await h.clock.advance(1);
    expect(h.engine.container("cm-dep_stubborn-run1")).toMatchObject({ signals: ["SIGTERM", "SIGKILL"], state: { running: false, exitCode: 137 } });
    await h.clock.advanceUntil(() => result !== undefined, "the stop's answer");
    expect(result).toEqual({ ok: true });
    expect(h.statuses("dep_stubborn")).toEqual(["1:starting", "1:running", "1:stopped"]);
    expect(h.reconciler.running()).toEqual([]);
    // Stopped, not removed: the tenant may start it again, and its log is still there.
    expect(h.engine.ps()).toHaveLength(1);
  });

  it("lets a program that handles SIGTERM finish on its own, without SIGKILL", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE, { onSigterm: { exitCode: 0, afterMs: 1_500 } });
    await h.settle(h.reconciler.sync([spec("dep_graceful")]));
    const stopAtMs = h.clock.now();
    await h.settle(h.reconciler.command("stop", spec("dep_graceful")));

    expect(h.engine.container("cm-dep_graceful-run1")).toMatchObject({ signals: ["SIGTERM"], state: { exitCode: 0 } });
    expect(Date.parse(h.engine.container("cm-dep_graceful-run1").state.finishedAt!) - stopAtMs).toBe(1_500);
    expect(h.statuses("dep_graceful")).toEqual(["1:starting", "1:running", "1:stopped"]);
  });

  it("still reports an exit when the stop itself failed", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE).failNext("stop", dockerError(500, "Cannot kill container: tried to kill container, but did not receive an exit event"));
    await h.settle(h.reconciler.sync([spec("dep_unstoppable")]));
    const result = await h.settle(h.reconciler.command("stop", spec("dep_unstoppable")));
    expect(result).toEqual({ ok: false, error: "Cannot kill container: tried to kill container, but did not receive an exit event" });
    expect(h.engine.container("cm-dep_unstoppable-run1").state.running).toBe(true);

    // It was never stopped on purpose: when it ends, the control plane must hear of it.
    h.engine.exit("cm-dep_unstoppable-run1", 1);
    await h.clock.advance(5_000);
    expect(h.lastStatus("dep_unstoppable")).toMatchObject({ status: "exited", exitCode: 1 });
  });

  it("removes the container after its last log lines went out, and reports it removed", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_rm")]));
    h.engine.write("cm-dep_rm-run1", "last words");
    await h.settle(h.reconciler.command("remove", spec("dep_rm")));

    expect(h.engine.ps()).toEqual([]);
    expect(h.storedLines("dep_rm").map((l) => l.message)).toEqual(["last words"]);
    expect(h.statuses("dep_rm")).toEqual(["1:starting", "1:running", "1:removed"]);
  });

  it("keeps a container whose removal came while the connection was down until its last lines are out", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_offline")]));
    h.engine.write("cm-dep_offline-run1", "written before the removal");
    h.disconnect();

    const result = await h.settle(h.reconciler.command("remove", spec("dep_offline")));
    expect(result.ok).toBe(false);
    expect(h.engine.ps().map((c) => c.state.running)).toEqual([false]);

    h.link.connected = true;
    await h.settle(h.reconciler.sync([spec("dep_offline", { desiredState: "removed", logCursor: h.cursor("dep_offline") })]));
    expect(h.engine.ps()).toEqual([]);
    expect(h.storedLines("dep_offline").map((l) => l.message)).toEqual(["written before the removal"]);
    expect(h.lastStatus("dep_offline")?.status).toBe("removed");
  });

  it("removes the containers of deployments the control plane no longer lists, and leaves other nodes' alone", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_kept"), spec("dep_dropped")]));
    const foreign = await h.engine.createContainer({
      deploymentId: "dep_elsewhere",
      nodeId: "node_other",
      userId: "u",
      image: IMAGE,
      env: {},
      exposedPorts: [],
      cpuCores: 1,
      memoryMb: 256,
      gpuDeviceIds: [],
      labels: CONTAINER_LABELS,
    });
    await h.engine.start(foreign);

    await h.settle(h.reconciler.sync([spec("dep_kept")]));
    expect(h.engine.ps().map((c) => c.spec.deploymentId)).toEqual(["dep_kept", "dep_elsewhere"]);
    expect(h.engine.container(foreign).state.running).toBe(true);
    expect(h.reconciler.running()).toEqual(["dep_kept"]);
  });
});

describe("a container that ends by itself", () => {
  it("is reported exited, with its code and when it ended, after its last log lines; the agent does not restart it", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_job")]));
    h.engine.write("cm-dep_job-run1", "epoch 1");
    h.engine.write("cm-dep_job-run1", "Traceback (most recent call last):", "stderr");
    await h.clock.advance(5_000); // well past the log's polls
    const endedAtMs = h.clock.now();
    h.engine.write("cm-dep_job-run1", "RuntimeError: CUDA out of memory", "stderr");
    h.engine.exit("cm-dep_job-run1", 1);
    await h.clock.advanceUntil(() => h.lastStatus("dep_job")?.status === "exited", "the exit reported");

    expect(h.lastStatus("dep_job")).toMatchObject({ runSeq: 1, status: "exited", exitCode: 1, reason: "the container exited with code 1", at: endedAtMs });
    const exitedAt = h.sent.findIndex((f) => f.type === "status" && f.status === "exited");
    const lastLinesAt = h.sent.findLastIndex((f) => f.type === "logs");
    expect(lastLinesAt).toBeLessThan(exitedAt);
    expect(h.storedLines("dep_job").map((l) => `${l.stream} ${l.message}`)).toEqual([
      "stdout epoch 1",
      "stderr Traceback (most recent call last):",
      "stderr RuntimeError: CUDA out of memory",
    ]);

    // The control plane still wants run 1 running (it has not seen the report yet): no restart.
    await h.settle(h.reconciler.sync([spec("dep_job", { logCursor: { seq: 3, dockerTs: h.storedLines("dep_job")[2]!.ts } })]));
    expect(h.engine.ps()).toHaveLength(1);
    expect(h.engine.container("cm-dep_job-run1").state.running).toBe(false);
    expect(h.statuses("dep_job")).toEqual(["1:starting", "1:running", "1:exited", "1:exited"]);
    expect(h.duplicateLines).toBe(0);
  });

  it("killed by the OOM killer, is reported as out of memory", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_oom", { memoryMb: 512 })]));
    h.engine.exit("cm-dep_oom-run1", 137, { oomKilled: true });
    await h.clock.advanceUntil(() => h.lastStatus("dep_oom")?.status === "exited", "the exit reported");
    expect(h.lastStatus("dep_oom")).toMatchObject({
      exitCode: 137,
      reason: expect.stringMatching(/^the container ran out of memory .*was killed \(exit code 137\)$/),
    });
  });

  it("removed by an operator (`docker rm -f`), is reported exited, killed", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_rmf")]));
    h.engine.removeOutOfBand("cm-dep_rmf-run1");
    await h.clock.advanceUntil(() => h.lastStatus("dep_rmf")?.status === "exited", "the exit reported");
    expect(h.lastStatus("dep_rmf")).toMatchObject({ exitCode: 137, reason: "the container was killed by SIGKILL (exit code 137)" });
    expect(h.reconciler.running()).toEqual([]);
  });
});

describe("when dockerd restarts (live-restore) while containers run", () => {
  it("keeps watching them: an exit afterwards is still reported", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_live")]));
    h.engine.restartDaemon();
    await h.clock.advance(REWATCH_DELAY_MS);
    h.engine.exit("cm-dep_live-run1", 4);
    await h.clock.advanceUntil(() => h.lastStatus("dep_live")?.status === "exited", "the exit reported");
    expect(h.lastStatus("dep_live")).toMatchObject({ exitCode: 4, reason: "the container exited with code 4" });
  });

  it("reports a container that ended while it was not watched, with its exit code", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_gap")]));
    h.engine.restartDaemon();
    await h.clock.advance(1_000);
    h.engine.exit("cm-dep_gap-run1", 3);
    await h.clock.advanceUntil(() => h.lastStatus("dep_gap")?.status === "exited", "the exit reported", REWATCH_DELAY_MS + 5_000);
    expect(h.lastStatus("dep_gap")).toMatchObject({ exitCode: 3 });
    expect(h.statuses("dep_gap")).toEqual(["1:starting", "1:running", "1:exited"]);
  });
});

describe("restarting a deployment", () => {
  it("a new run stops the old container gracefully, removes it and starts a fresh one, without reporting the old one crashed", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_again", { env: { V: "1" } })]));
    const first = h.engine.container("cm-dep_again-run1");
    h.engine.write(first.id, "run 1, last words");

    const result = await h.settle(h.reconciler.command("start", spec("dep_again", { runSeq: 2, env: { V: "2" } })));
    expect(result).toEqual({ ok: true });
    expect(h.engine.ps().map((c) => [c.name, c.state.running, c.spec.env])).toEqual([["cm-dep_again-run2", true, { V: "2" }]]);
    expect(h.engine.ps()[0]!.id).not.toBe(first.id);
    expect(h.statuses("dep_again")).toEqual(["1:starting", "1:running", "2:starting", "2:running"]);
    // The old run's log went out before its container (and with it the log) was removed.
    expect(h.storedLines("dep_again").map((l) => l.message)).toEqual(["run 1, last words"]);
  });

  it("starts again a deployment that was stopped, as a new run", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_pause")]));
    await h.settle(h.reconciler.command("stop", spec("dep_pause")));
    await h.settle(h.reconciler.command("start", spec("dep_pause", { runSeq: 2 })));
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_pause-run2", true]]);
    expect(h.statuses("dep_pause")).toEqual(["1:starting", "1:running", "1:stopped", "2:starting", "2:running"]);
  });

  it("ignores a desired state for an older run that arrives late", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_late", { runSeq: 3 })]));
    await h.settle(h.reconciler.command("stop", spec("dep_late", { runSeq: 2 })));
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_late-run3", true]]);
    expect(h.statuses("dep_late")).toEqual(["3:starting", "3:running"]);
  });
});

describe("an agent restart", () => {
  it("adopts the running containers: nothing is restarted, and an exit afterwards is still reported", async () => {
    const first = reconcilerHarness();
    first.engine.loadImage(IMAGE);
    await first.settle(first.reconciler.sync([spec("dep_long")]));
    const before = first.engine.container("cm-dep_long-run1");
    first.reconciler.stop(); // the agent is gone; its containers stay

    const second = reconcilerHarness({ engine: first.engine, clock: first.clock });
    const adopted = await second.reconciler.adopt();
    expect(adopted.map((c) => c.id)).toEqual([before.id]);
    await second.settle(second.reconciler.sync([spec("dep_long")]));
    expect(second.engine.ps().map((c) => [c.id, c.state.startedAt])).toEqual([[before.id, before.state.startedAt]]);
    expect(second.statuses("dep_long")).toEqual(["1:running"]);
    expect(second.reconciler.running()).toEqual(["dep_long"]);

    second.engine.exit(before.id, 2);
    await second.clock.advanceUntil(() => second.lastStatus("dep_long")?.status === "exited", "the exit reported");
    expect(second.lastStatus("dep_long")).toMatchObject({ exitCode: 2 });
    expect(first.statuses("dep_long")).toEqual(["1:starting", "1:running"]);
  });

  it("keeps a lost node's ended deployment's stopped container until removeAfter, then removes it", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_lost"), spec("dep_old")]));
    const hourMs = 3_600_000;
    await h.settle(
      h.reconciler.sync([
        spec("dep_lost", { desiredState: "stopped", removeAfter: h.clock.now() + hourMs }),
        spec("dep_old", { desiredState: "stopped", removeAfter: h.clock.now() - 1 }),
      ]),
    );
    // Past its time already: removed at once. Within it: stopped, kept with its files.
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_lost-run1", false]]);
    await h.clock.advance(hourMs - 1_000);
    expect(h.engine.ps()).toHaveLength(1);
    await h.clock.advanceUntil(() => h.engine.ps().length === 0, "the kept container removed", 5_000);
    // Started again meanwhile (a newer desired state): the new run's container is not removed when the old time comes.
    await h.settle(h.reconciler.sync([spec("dep_back"), spec("dep_lost", { desiredState: "stopped", runSeq: 1 })]));
    await h.settle(h.reconciler.sync([spec("dep_back", { desiredState: "stopped", removeAfter: h.clock.now() + hourMs })]));
    await h.settle(h.reconciler.command("start", spec("dep_back", { runSeq: 2 })));
    await h.clock.advance(hourMs + 1_000);
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_back-run2", true]]);
  });

  it("reports a run whose container was removed behind its back as removed, and does not start it again", async () => {
    const first = reconcilerHarness();
    first.engine.loadImage(IMAGE);
    await first.settle(first.reconciler.sync([spec("dep_gone")]));
    first.reconciler.stop();
    // Someone ran docker rm -f on the node while no agent ran.
    await first.engine.remove(first.engine.container("cm-dep_gone-run1").id);

    const second = reconcilerHarness({ engine: first.engine, clock: first.clock });
    await second.settle(second.reconciler.sync([spec("dep_gone", { started: true })]));
    expect(second.engine.ps()).toEqual([]);
    expect(second.lastStatus("dep_gone")).toMatchObject({ status: "removed", reason: "the container was removed on the node, outside the platform" });
    // A run not started yet (no container, never reported running) is started as before.
    await second.settle(second.reconciler.sync([spec("dep_new")]));
    expect(second.statuses("dep_new")).toEqual(["1:starting", "1:running"]);
  });

  it("reports an exit that happened while no agent ran, stamped when it happened", async () => {
    const first = reconcilerHarness();
    first.engine.loadImage(IMAGE);
    await first.settle(first.reconciler.sync([spec("dep_alone")]));
    first.reconciler.stop();
    const endedAtMs = first.clock.now();
    first.engine.exit("cm-dep_alone-run1", 9);
    await first.clock.advance(60_000); // the new agent starts a minute later

    const second = reconcilerHarness({ engine: first.engine, clock: first.clock });
    await second.settle(second.reconciler.sync([spec("dep_alone")]));
    expect(second.statuses("dep_alone")).toEqual(["1:exited"]);
    expect(second.lastStatus("dep_alone")).toMatchObject({ exitCode: 9, reason: "the container exited with code 9", at: endedAtMs });
    expect(first.engine.ps()).toHaveLength(1); // not restarted
  });

  it("starts afresh a run whose container the last agent created but never started", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    const orphan = await h.engine.createContainer({
      deploymentId: "dep_half",
      nodeId: NODE_ID,
      userId: "usr_tenant",
      image: IMAGE,
      env: {},
      exposedPorts: [],
      cpuCores: 1,
      memoryMb: 256,
      gpuDeviceIds: [],
      labels: { ...CONTAINER_LABELS, "cm.run-seq": "1", "cm.gpus": "" },
      name: "cm-dep_half-run1",
    });
    await h.settle(h.reconciler.sync([spec("dep_half")]));
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_half-run1", true]]);
    expect(h.engine.ps()[0]!.id).not.toBe(orphan);
    expect(h.statuses("dep_half")).toEqual(["1:starting", "1:running"]);
  });

  it("removes what a previous enrolment of this machine left, but never another agent's containers", async () => {
    const h = reconcilerHarness({ installId: "ins_this" });
    h.engine.loadImage(IMAGE);
    const leftOver = async (nodeId: string, installId: string) => {
      const id = await h.engine.createContainer({
        deploymentId: `dep_${installId}`,
        nodeId,
        userId: "u",
        image: IMAGE,
        env: {},
        exposedPorts: [],
        cpuCores: 1,
        memoryMb: 256,
        gpuDeviceIds: [],
        labels: { ...CONTAINER_LABELS, "cm.install-id": installId },
      });
      await h.engine.start(id);
      return id;
    };
    const ours = await leftOver("node_before", "ins_this");
    const theirs = await leftOver("node_neighbour", "ins_other");
    await h.settle(h.reconciler.sync([]));
    expect(h.engine.ps().map((c) => c.id)).toEqual([theirs]);
    expect(h.engine.ps().map((c) => c.id)).not.toContain(ours);
  });
});

describe("when Docker cannot be reached", () => {
  it("answers the command with Docker's error and converges on the next sync", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE).failNext("listManaged", dockerError(500, "connect ECONNREFUSED /var/run/docker.sock"));
    const result = await h.settle(h.reconciler.command("create", spec("dep_retry")));
    expect(result).toEqual({ ok: false, error: "connect ECONNREFUSED /var/run/docker.sock" });
    expect(h.engine.ps()).toEqual([]);

    await h.settle(h.reconciler.sync([spec("dep_retry")]));
    expect(h.engine.container("cm-dep_retry-run1").state.running).toBe(true);
  });
});
