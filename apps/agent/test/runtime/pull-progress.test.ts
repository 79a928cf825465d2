import { hasTagOrDigest, localImageCandidates } from "@cm/protocol";
import { describe, expect, it } from "vitest";
import type { PullEvent } from "../../src/runtime/pull-progress";
import { initialPullState, pullEventError, reducePullEvent, summarizePull } from "../../src/runtime/pull-progress";

// The event sequence of a two-layer pull where a third layer is cached, in the
// shape Docker's /images/create stream sends (statuses and fields as Docker
// 20.10-27.x emit them; not captured here, since no registry is reachable).
const events: PullEvent[] = [
  { status: "Pulling from library/python", id: "3.12-slim" },
  { status: "Already exists", progressDetail: {}, id: "a2abf6c4d29d" },
  { status: "Pulling fs layer", progressDetail: {}, id: "2b3b0c36a3e1" },
  { status: "Pulling fs layer", progressDetail: {}, id: "9f3b1ab8e3d1" },
  { status: "Waiting", progressDetail: {}, id: "9f3b1ab8e3d1" },
  { status: "Downloading", progressDetail: { current: 1079, total: 3512000 }, id: "2b3b0c36a3e1" },
  { status: "Downloading", progressDetail: { current: 2000000, total: 3512000 }, id: "2b3b0c36a3e1" },
  { status: "Downloading", progressDetail: { current: 500, total: 12000000 }, id: "9f3b1ab8e3d1" },
  { status: "Verifying Checksum", progressDetail: {}, id: "2b3b0c36a3e1" },
  { status: "Download complete", progressDetail: {}, id: "2b3b0c36a3e1" },
  { status: "Extracting", progressDetail: { current: 65536, total: 3512000 }, id: "2b3b0c36a3e1" },
  { status: "Pull complete", progressDetail: {}, id: "2b3b0c36a3e1" },
  { status: "Downloading", progressDetail: { current: 12000000, total: 12000000 }, id: "9f3b1ab8e3d1" },
  { status: "Download complete", progressDetail: {}, id: "9f3b1ab8e3d1" },
  { status: "Pull complete", progressDetail: {}, id: "9f3b1ab8e3d1" },
  { status: "Digest: sha256:3f0e9f6b1c2d" },
  { status: "Status: Downloaded newer image for python:3.12-slim" },
];

function progressAfter(count: number) {
  return summarizePull(events.slice(0, count).reduce(reducePullEvent, initialPullState));
}

describe("pull progress", () => {
  it("counts layers and bytes as the pull goes", () => {
    expect(progressAfter(1)).toEqual({ layersDone: 0, layersTotal: 0 });
    expect(progressAfter(4)).toEqual({ layersDone: 1, layersTotal: 3 });
    expect(progressAfter(7)).toEqual({ layersDone: 1, layersTotal: 3, bytesDone: 2000000, bytesTotal: 3512000 });
    expect(progressAfter(8)).toEqual({ layersDone: 1, layersTotal: 3, bytesDone: 2000500, bytesTotal: 15512000 });
    // Extracting's counters are unpacked bytes; the download stays complete.
    expect(progressAfter(11)).toEqual({ layersDone: 1, layersTotal: 3, bytesDone: 3512500, bytesTotal: 15512000 });
    expect(progressAfter(12)).toMatchObject({ layersDone: 2, layersTotal: 3 });
    expect(progressAfter(events.length)).toEqual({ layersDone: 3, layersTotal: 3, bytesDone: 15512000, bytesTotal: 15512000 });
  });

  it("leaves the old state untouched and returns it as is for events without progress", () => {
    const state = reducePullEvent(initialPullState, events[2]!);
    expect(reducePullEvent(state, events[15]!)).toBe(state);
    expect(initialPullState.size).toBe(0);
  });

  it("reads errors reported inside the stream", () => {
    expect(pullEventError({ errorDetail: { message: "manifest for foo:1 not found: manifest unknown" }, error: "manifest unknown" })).toBe(
      "manifest for foo:1 not found: manifest unknown",
    );
    expect(pullEventError(events[5]!)).toBeUndefined();
  });
});

describe("image references", () => {
  it("tells tags from registry ports", () => {
    expect(hasTagOrDigest("busybox")).toBe(false);
    expect(hasTagOrDigest("busybox:1.36")).toBe(true);
    expect(hasTagOrDigest("localhost:5000/app")).toBe(false);
    expect(hasTagOrDigest("localhost:5000/app:v2")).toBe(true);
    expect(hasTagOrDigest("ghcr.io/org/app@sha256:abc")).toBe(true);
  });

  it("also looks for :latest when no tag is given", () => {
    expect(localImageCandidates("pytorch/pytorch")).toEqual(["pytorch/pytorch", "pytorch/pytorch:latest"]);
    expect(localImageCandidates("pytorch/pytorch:2.3.0")).toEqual(["pytorch/pytorch:2.3.0"]);
  });
});
