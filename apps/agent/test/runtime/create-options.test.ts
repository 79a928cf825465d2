import { describe, expect, it } from "vitest";
import {
  bridgeName,
  buildContainerCreateOptions,
  buildSandboxCreateOptions,
  buildSandboxNetworkOptions,
  mayCapWritableLayers,
} from "../../src/runtime/create-options";
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
    const { HostConfig } = buildContainerCreateOptions(spec, "cm-sbx-1");
    expect(HostConfig).toMatchObject({
      Privileged: false,
      CapDrop: ["ALL"],
      CapAdd: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETGID", "SETUID", "NET_BIND_SERVICE", "KILL"],
      SecurityOpt: ["no-new-privileges"],
      PidsLimit: 1024,
      Init: true,
      LogConfig: { Type: "json-file", Config: { "max-size": "10m", "max-file": "3" } },
      RestartPolicy: { Name: "no" },
      Ulimits: [{ Name: "nofile", Soft: 16_384, Hard: 16_384 }],
      IpcMode: "private",
    });
    // Docker's default seccomp profile, and the host's namespaces never shared.
    expect(HostConfig?.SecurityOpt?.some((opt: string) => /seccomp|apparmor/.test(opt))).toBe(false);
    expect(HostConfig?.PidMode).toBeUndefined();
    expect(HostConfig?.UTSMode).toBeUndefined();
    expect(HostConfig?.Binds).toBeUndefined();
    expect(HostConfig?.Mounts).toBeUndefined();
    expect(HostConfig?.DeviceRequests).toBeUndefined();
  });

  it("translates the spec's limits, env, command, ports and sandbox", () => {
    const options = buildContainerCreateOptions(spec, "cm-sbx-1");
    expect(options).toMatchObject({
      Image: "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
      Env: ["HF_TOKEN=x=y", "PORT=8080"],
      Cmd: ["python", "serve.py"],
      Tty: false,
      Labels: {
        "cm.managed": "true",
        "cm.deployment-id": "dep-1",
        "cm.node-id": "node-1",
        "cm.user-id": "user-1",
        "cm.sandbox-name": "cm-sbx-1",
        "cm.ports": "8080,22",
      },
    });
    // Docker refuses both in a joined network namespace: the ports travel as a label.
    expect(options).not.toHaveProperty("ExposedPorts");
    expect(options).not.toHaveProperty("NetworkingConfig");
    expect(options.HostConfig).toMatchObject({
      NanoCpus: 7_500_000_000,
      CpuShares: 7_680,
      Memory: 65536 * 1024 * 1024,
      MemorySwap: 65536 * 1024 * 1024,
      NetworkMode: "container:cm-sbx-1",
    });
    expect(options.name).toBeUndefined();
  });

  it("caps the cores a tenant asked for, and only weighs a default's, in proportion to its cores", () => {
    const asked = buildContainerCreateOptions({ ...spec, cpuCores: 0.1, cpuLimit: "quota" }, "cm-sbx-1").HostConfig;
    expect([asked?.NanoCpus, asked?.CpuShares]).toEqual([100_000_000, 102]);
    const byDefault = buildContainerCreateOptions({ ...spec, cpuCores: 0.04, cpuLimit: "weight" }, "cm-sbx-1").HostConfig;
    expect(byDefault?.CpuShares).toBe(41);
    expect(byDefault).not.toHaveProperty("NanoCpus");
    expect(byDefault).not.toHaveProperty("CpuQuota");
    // The kernel's floor and ceiling.
    expect(buildContainerCreateOptions({ ...spec, cpuCores: 0.001, cpuLimit: "weight" }, "cm-sbx-1").HostConfig?.CpuShares).toBe(2);
    expect(buildContainerCreateOptions({ ...spec, cpuCores: 512, cpuLimit: "weight" }, "cm-sbx-1").HostConfig?.CpuShares).toBe(262_144);
  });

  it("requests exactly the given GPUs from the nvidia driver", () => {
    const options = buildContainerCreateOptions({ ...spec, gpuDeviceIds: ["GPU-36f675cc-81e7-4ef5-a8e2-5d940ed90475", "3"] }, "cm-sbx-1");
    expect(options.HostConfig?.DeviceRequests).toEqual([
      { Driver: "nvidia", DeviceIDs: ["GPU-36f675cc-81e7-4ef5-a8e2-5d940ed90475", "3"], Capabilities: [["gpu"]] },
    ]);
  });

  it("replaces the image's ENTRYPOINT when the spec gives one", () => {
    expect(buildContainerCreateOptions({ ...spec, entrypoint: ["/bin/sh", "-c"] }, "cm-sbx-1")).toMatchObject({
      Entrypoint: ["/bin/sh", "-c"],
      Cmd: ["python", "serve.py"],
    });
  });

  it("keeps the image's CMD when none is given, and sets no limit for 0", () => {
    const options = buildContainerCreateOptions({ ...spec, cmd: undefined, cpuCores: 0, memoryMb: 0, exposedPorts: [] }, "cm-sbx-1");
    expect(options).not.toHaveProperty("Cmd");
    expect(options).not.toHaveProperty("Entrypoint");
    expect(options.HostConfig).not.toHaveProperty("NanoCpus");
    expect(options.HostConfig).not.toHaveProperty("CpuShares");
    expect(options.HostConfig).not.toHaveProperty("Memory");
    expect(options.Labels?.["cm.ports"]).toBe("");
  });

  it("sizes /dev/shm and stamps the disk allowance when the spec gives them", () => {
    const options = buildContainerCreateOptions({ ...spec, shmMb: 512, diskGb: 30 }, "cm-sbx-1");
    expect(options.HostConfig?.ShmSize).toBe(512 * 1024 * 1024);
    expect(options.Labels?.["cm.disk-gb"]).toBe("30");
    const plain = buildContainerCreateOptions(spec, "cm-sbx-1");
    expect(plain.HostConfig).not.toHaveProperty("ShmSize");
    expect(plain.Labels).not.toHaveProperty("cm.disk-gb");
  });

  it("caps the writable layer at the allowance where the engine can", () => {
    expect(buildContainerCreateOptions({ ...spec, diskGb: 30 }, "cm-sbx-1", { capsWritableLayer: true }).HostConfig?.StorageOpt).toEqual({
      size: "30000000000",
    });
    expect(buildContainerCreateOptions({ ...spec, diskGb: 30 }, "cm-sbx-1").HostConfig).not.toHaveProperty("StorageOpt");
    expect(buildContainerCreateOptions(spec, "cm-sbx-1", { capsWritableLayer: true }).HostConfig).not.toHaveProperty("StorageOpt");
    expect(
      mayCapWritableLayers({
        Driver: "overlay2",
        DriverStatus: [
          ["Backing Filesystem", "xfs"],
          ["Supports d_type", "true"],
        ],
      }),
    ).toBe(true);
    expect(mayCapWritableLayers({ Driver: "overlay2", DriverStatus: [["Backing Filesystem", "extfs"]] })).toBe(false);
  });

  it("does not let extra labels overwrite the cm.* ones", () => {
    const options = buildContainerCreateOptions({ ...spec, labels: { "cm.user-id": "someone-else", team: "a" } }, "cm-sbx-1");
    expect(options.Labels).toMatchObject({ "cm.user-id": "user-1", team: "a" });
  });
});

describe("sandbox options", () => {
  const labels = { "cm.node-id": "node-1", "cm.test-run": "r1" };

  it("makes a labelled bridge network named after the sandbox, its interface too", () => {
    expect(buildSandboxNetworkOptions("cm-sbx-1", labels)).toEqual({
      Name: "cm-sbx-1",
      Driver: "bridge",
      CheckDuplicate: true,
      Labels: { "cm.node-id": "node-1", "cm.test-run": "r1", "cm.sandbox": "true" },
      Options: { "com.docker.network.bridge.name": "cm-1" },
    });
  });

  it("names bridges within Linux's 15 characters, with the prefix the egress rules match", () => {
    expect(bridgeName("cm-sbx-0123456789ab")).toBe("cm-0123456789ab");
    expect(bridgeName("cm-sbx-0123456789ab", "cmtest")).toBe("cmtest012345678");
  });

  it("runs only the pause program, as nobody, with nothing it could use", () => {
    const options = buildSandboxCreateOptions("cm-sbx-1", "cm-sandbox:abc", labels);
    expect(options).toMatchObject({
      name: "cm-sbx-1",
      Image: "cm-sandbox:abc",
      Entrypoint: ["/pause"],
      User: "65534:65534",
      StopSignal: "SIGKILL",
      Labels: { "cm.sandbox": "true", "cm.node-id": "node-1" },
      NetworkingConfig: { EndpointsConfig: { "cm-sbx-1": {} } },
    });
    expect(options.HostConfig).toMatchObject({
      NetworkMode: "cm-sbx-1",
      CapDrop: ["ALL"],
      ReadonlyRootfs: true,
      SecurityOpt: ["no-new-privileges"],
      PidsLimit: 32,
      Memory: 32 * 1024 * 1024,
    });
    expect(options.HostConfig).not.toHaveProperty("CapAdd");
    // Never counted as a tenant's container.
    expect(options.Labels).not.toHaveProperty("cm.managed");
  });
});
