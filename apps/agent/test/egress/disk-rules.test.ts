// The disk watcher's verdicts as pure functions: which layers are over, and when a new deployment is refused.
import { describe, expect, it } from "vitest";
import { admissionProblem, BYTES_PER_GB, overAllowance } from "../../src/disk/disk-watcher";
import { toWritableLayer } from "../../src/runtime/docker-disk-client";

describe("overAllowance", () => {
  const layer = (sizeGb: number, diskGb: string | undefined, state = "running") =>
    toWritableLayer({
      Id: `c-${sizeGb}-${diskGb}`,
      State: state,
      SizeRw: sizeGb * BYTES_PER_GB,
      Labels: { "cm.deployment-id": "dep_1", ...(diskGb ? { "cm.disk-gb": diskGb } : {}) },
    });

  it("measures against the container's own allowance, else the node's default", () => {
    const over = overAllowance([layer(31, "30"), layer(29, "30"), layer(21, undefined), layer(19, undefined)], 20);
    expect(over.map((o) => [o.layer.containerId, o.allowanceGb])).toEqual([
      ["c-31-30", 30],
      ["c-21-undefined", 20],
    ]);
    expect(over[0]?.reason).toBe("the container wrote 31.0 GB to its disk, past its allowance of 30 GB, and was stopped");
  });

  it("leaves stopped containers alone: there is nothing left to stop", () => {
    expect(overAllowance([layer(50, "1", "exited")], 20)).toEqual([]);
  });

  it("reads an unreadable allowance label as none", () => {
    expect(toWritableLayer({ Id: "c", State: "running", Labels: { "cm.disk-gb": "lots" } })).toMatchObject({
      diskGb: undefined,
      sizeBytes: 0,
      deploymentId: "",
    });
  });
});

describe("admissionProblem", () => {
  it("admits while the allowance fits above the reserve", () => {
    expect(admissionProblem(40 * BYTES_PER_GB, 10, 30)).toBeUndefined();
    expect(admissionProblem(39 * BYTES_PER_GB, 10, 30)).toBe(
      "this node has 39.0 GB of disk free, not enough for the deployment's 30 GB beside the 10 GB it keeps for itself",
    );
  });
});
