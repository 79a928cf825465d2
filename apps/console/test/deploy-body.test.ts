import { describe, expect, it } from "vitest";
import { type DeployForm, deployBody, splitCommand } from "../src/components/deploy-body";

// The deploy form's text as the API's body: what the form can tell before the API judges the rest.

const form = (o: Partial<DeployForm> = {}): DeployForm => ({
  source: "template",
  templateId: "ollama",
  image: "",
  registryCredentialId: "",
  placement: "cheapest",
  nodeId: "",
  region: "",
  maxHourlyRate: "",
  gpuModel: "",
  minGpuVram: "",
  name: "",
  gpuCount: "",
  cpuCores: "",
  memoryMb: "",
  command: "",
  env: [],
  ports: "",
  tcpPorts: "",
  ...o,
});

describe("the deploy form's body", () => {
  it("splits a command into words as a shell would, without a shell", () => {
    expect(splitCommand(`sh -c "while true; do echo 'a b'; done"`)).toEqual(["sh", "-c", "while true; do echo 'a b'; done"]);
    expect(splitCommand(`echo a\\ b '' "x\\"y"`)).toEqual(["echo", "a b", "", 'x"y']);
    expect(splitCommand("  python   app.py  ")).toEqual(["python", "app.py"]);
    expect(splitCommand(`echo "unclosed`)).toBeUndefined();
  });

  it("sends only what was filled in: the template and cheapest placement alone", () => {
    expect(deployBody(form())).toEqual({ body: { templateId: "ollama" } });
  });

  it("carries an image with its credential, a node, resources, env rows, command and ports", () => {
    const built = deployBody(
      form({
        source: "image",
        image: " ghcr.io/org/app:1 ",
        registryCredentialId: "rc_1",
        placement: "node",
        nodeId: "node_1",
        region: "eu-west",
        gpuCount: "2",
        cpuCores: "1.5",
        memoryMb: "2048",
        command: "serve --port 8000",
        env: [
          { key: 1, name: "A", value: "1" },
          { key: 2, name: "", value: "" },
        ],
        ports: "8000, 8001",
        tcpPorts: "22",
      }),
    );
    // region is a placement filter: with a node picked it is not sent.
    expect(built).toEqual({
      body: {
        customImage: "ghcr.io/org/app:1",
        registryCredentialId: "rc_1",
        nodeId: "node_1",
        gpuCount: 2,
        cpuCores: 1.5,
        memoryMb: 2048,
        command: ["serve", "--port", "8000"],
        env: { A: "1" },
        ports: [8000, 8001],
        tcpPorts: [22],
      },
    });
  });

  it("says what to fix for what it can tell is wrong", () => {
    const problem = (o: Partial<DeployForm>) => ("problem" in deployBody(form(o)) ? (deployBody(form(o)) as { problem: string }).problem : undefined);
    expect(problem({ templateId: "" })).toBe("Pick a template.");
    expect(problem({ source: "image" })).toMatch(/image to run/);
    expect(problem({ placement: "node" })).toMatch(/Pick a node/);
    expect(problem({ ports: "80, http" })).toMatch(/HTTP ports: "http" is not a port/);
    expect(problem({ tcpPorts: "70000" })).toMatch(/TCP ports/);
    expect(problem({ gpuCount: "1.5" })).toMatch(/GPU count must be a whole number/);
    expect(problem({ env: [{ key: 1, name: "1X", value: "" }] })).toMatch(/Environment variable "1X"/);
    expect(
      problem({
        env: [
          { key: 1, name: "X", value: "" },
          { key: 2, name: "X", value: "y" },
        ],
      }),
    ).toMatch(/given twice/);
    expect(problem({ command: `echo "a` })).toMatch(/quote/);
    expect(problem({ maxHourlyRate: "-1" })).toMatch(/Maximum price/);
  });
});
