import type Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { toContainerExit, toContainerState } from "../../src/runtime/container-state";
import { readJsonFixture } from "../support/fixtures";

// `docker inspect` of containers made by DockerRuntime on Docker 20.10.24.
const inspect = (file: string) => readJsonFixture<Docker.ContainerInspectInfo>(`docker/${file}`);

const owners = { deploymentId: "dep-rec1", nodeId: "node-rec", userId: "user-rec", image: "cm-test-busybox:latest" };

describe("toContainerState", () => {
  it("maps a created, never-started container: no times, no exit code", () => {
    expect(toContainerState(inspect("inspect-created.json"))).toEqual({
      id: "820c4357470966e73b28fff8161ddf7571154e0adf42936c5a8ec093651550b9",
      name: "recursing_payne",
      ...owners,
      labels: { "cm.managed": "true", "cm.deployment-id": "dep-rec1", "cm.node-id": "node-rec", "cm.user-id": "user-rec", "cm.test-run": "record" },
      status: "created",
      running: false,
      exitCode: null,
      startedAt: null,
      finishedAt: null,
      oomKilled: false,
      error: "",
      ipAddress: null,
      ports: [{ containerPort: 8080 }],
      logPath: null, // Docker names the file at the first start
    });
  });

  it("maps a running container with its IP on the deployment network and its host port", () => {
    expect(toContainerState(inspect("inspect-running.json"))).toMatchObject({
      ...owners,
      status: "running",
      running: true,
      exitCode: null,
      startedAt: "2026-11-22T02:12:15.422Z",
      finishedAt: null,
      ipAddress: "172.18.0.2",
      ports: [{ containerPort: 8080, hostPort: 32768 }],
      logPath: expect.stringMatching(/^\/var\/lib\/docker\/containers\/[0-9a-f]{64}\/[0-9a-f]{64}-json\.log$/),
    });
  });

  it("maps a running container in a sandbox: the sandbox's address and the labelled ports", () => {
    const info = inspect("inspect-running-sandboxed.json");
    expect(info.HostConfig.NetworkMode).toMatch(/^container:[0-9a-f]{64}$/);
    expect(toContainerState(info, "172.27.0.2")).toMatchObject({
      deploymentId: "dep-rec3",
      running: true,
      ipAddress: "172.27.0.2",
      ports: [{ containerPort: 8080 }, { containerPort: 9000 }],
    });
    // No sandbox address known: no address, rather than a wrong one.
    expect(toContainerState(info).ipAddress).toBeNull();
    // Stopped: no address even if the sandbox still has one.
    expect(toContainerState({ ...info, State: { ...info.State, Running: false, Status: "exited" } }, "172.27.0.2").ipAddress).toBeNull();
  });

  it("maps an exited container with its exit code", () => {
    expect(toContainerState(inspect("inspect-exited-code-3.json"))).toMatchObject({
      deploymentId: "dep-rec2",
      status: "exited",
      running: false,
      exitCode: 3,
      startedAt: "2026-11-22T02:12:17.228Z",
      finishedAt: "2026-11-22T02:12:17.234Z",
      oomKilled: false,
      ipAddress: null,
      ports: [],
    });
    expect(toContainerExit(inspect("inspect-exited-code-3.json"))).toEqual({
      id: "641bdd724eb643666f2a833b987fbabd90cde948e2c35ef2efc3c5300ff18191",
      exitCode: 3,
      oomKilled: false,
      error: "",
    });
  });

  it("reports an OOM kill and Docker's error", () => {
    const info = inspect("inspect-exited-code-3.json");
    const oom = { ...info, State: { ...info.State, ExitCode: 137, OOMKilled: true, Error: "" } };
    expect(toContainerState(oom)).toMatchObject({ exitCode: 137, oomKilled: true });
    const failed = { ...info, State: { ...info.State, ExitCode: 127, Error: 'exec: "python": executable file not found in $PATH' } };
    expect(toContainerState(failed).error).toContain("executable file not found");
  });

  it("leaves ids empty for a container without our labels", () => {
    const info = inspect("inspect-running.json");
    const foreign = { ...info, Config: { ...info.Config, Labels: {} } };
    expect(toContainerState(foreign)).toMatchObject({ deploymentId: "", nodeId: "", userId: "", labels: {}, ipAddress: null });
  });
});
