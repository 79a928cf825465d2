import { describe, expect, it } from "vitest";
import { buildContainerCreateOptions, buildNetworkCreateOptions } from "../../src/runtime/create-options";
import type { ContainerSpec } from "../../src/runtime/types";

const spec: ContainerSpec = {
  deploymentId: "dep-1",
  nodeId: "node-1",
  userId: "user-1",
  image: "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
  env: { HF_TOKEN: "x=y", PORT: "8080" },
  cmd: ["python", "serve.py"],
  exposedPorts: [8080, 22],
  cpuCores: 7.5,
  memoryMb: 65536,
  gpuDeviceIds: [],
};

describe("buildContainerCreateOptions", () => {
  it("hardens every container the same way", () => {
    const { HostConfig } = buildContainerCreateOptions(spec);
    expect(HostConfig).toMatchObject({
      Privileged: false,
      CapDrop: ["ALL"],
      CapAdd: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETGID", "SETUID", "NET_BIND_SERVICE", "KILL"],
      SecurityOpt: ["no-new-privileges"],
      PidsLimit: 1024,
      Init: true,
      LogConfig: { Type: "json-file", Config: { "max-size": "10m", "max-file": "3" } },
      RestartPolicy: { Name: "no" },
    });
    expect(HostConfig?.Binds).toBeUndefined();
    expect(HostConfig?.Mounts).toBeUndefined();
    expect(HostConfig?.DeviceRequests).toBeUndefined();
  });

  it("translates the spec's limits, env, command, ports and network", () => {
    const options = buildContainerCreateOptions(spec);
    expect(options).toMatchObject({
      Image: "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
      Env: ["HF_TOKEN=x=y", "PORT=8080"],
      Cmd: ["python", "serve.py"],
      Tty: false,
      ExposedPorts: { "8080/tcp": {}, "22/tcp": {} },
      NetworkingConfig: { EndpointsConfig: { "cm-dep-1": {} } },
      Labels: { "cm.managed": "true", "cm.deployment-id": "dep-1", "cm.node-id": "node-1", "cm.user-id": "user-1" },
    });
    expect(options.HostConfig).toMatchObject({
      NanoCpus: 7_500_000_000,
      Memory: 65536 * 1024 * 1024,
      MemorySwap: 65536 * 1024 * 1024,
      NetworkMode: "cm-dep-1",
    });
    expect(options.name).toBeUndefined();
  });

  it("requests exactly the given GPUs from the nvidia driver", () => {
    const options = buildContainerCreateOptions({ ...spec, gpuDeviceIds: ["GPU-36f675cc-81e7-4ef5-a8e2-5d940ed90475", "3"] });
    expect(options.HostConfig?.DeviceRequests).toEqual([
      { Driver: "nvidia", DeviceIDs: ["GPU-36f675cc-81e7-4ef5-a8e2-5d940ed90475", "3"], Capabilities: [["gpu"]] },
    ]);
  });

  it("keeps the image's CMD when none is given, and sets no limit for 0", () => {
    const options = buildContainerCreateOptions({ ...spec, cmd: undefined, cpuCores: 0, memoryMb: 0, exposedPorts: [] });
    expect(options).not.toHaveProperty("Cmd");
    expect(options.HostConfig).not.toHaveProperty("NanoCpus");
    expect(options.HostConfig).not.toHaveProperty("Memory");
    expect(options.ExposedPorts).toEqual({});
  });

  it("does not let extra labels overwrite the cm.* ones", () => {
    const options = buildContainerCreateOptions({ ...spec, labels: { "cm.user-id": "someone-else", team: "a" } });
    expect(options.Labels).toMatchObject({ "cm.user-id": "user-1", team: "a" });
  });
});

describe("buildNetworkCreateOptions", () => {
  it("makes a labelled bridge network named after the deployment", () => {
    expect(buildNetworkCreateOptions(spec)).toEqual({
      Name: "cm-dep-1",
      Driver: "bridge",
      CheckDuplicate: true,
      Labels: { "cm.managed": "true", "cm.deployment-id": "dep-1", "cm.node-id": "node-1", "cm.user-id": "user-1" },
    });
  });
});
