// Docker's pull answers with a stream of JSON events, one per line, e.g.
//   {"status":"Pulling fs layer","progressDetail":{},"id":"2b3b0c36a3e1"}
//   {"status":"Downloading","progressDetail":{"current":1079,"total":29534055},"progress":"[>  ]","id":"2b3b0c36a3e1"}
//   {"status":"Download complete","progressDetail":{},"id":"2b3b0c36a3e1"}
//   {"status":"Extracting","progressDetail":{"current":294912,"total":29534055},"id":"2b3b0c36a3e1"}
//   {"status":"Pull complete","progressDetail":{},"id":"2b3b0c36a3e1"}
//   {"status":"Already exists","progressDetail":{},"id":"a2abf6c4d29d"}
//   {"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"}
// Events without a layer id ("Pulling from library/x", "Digest: ...", "Status: ...")
// carry no progress. These functions fold the events into a PullProgress.
import type { PullProgress } from "./types";

export interface PullEvent {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
}

interface LayerProgress {
  done: boolean;
  downloadedBytes: number;
  totalBytes?: number;
}

export type PullState = ReadonlyMap<string, LayerProgress>;

export const initialPullState: PullState = new Map();

// Statuses that name a layer; "Pulling from <repo>" also has an id (the tag) and must not count.
const LAYER_STATUSES = /^(Pulling fs layer|Waiting|Downloading|Verifying Checksum|Download complete|Extracting|Pull complete|Already exists|Retrying)/;
const LAYER_DONE = /^(Pull complete|Already exists)$/;

export function pullEventError(event: PullEvent): string | undefined {
  return event.errorDetail?.message ?? event.error;
}

/** Returns a new state; the old one is left as it was. */
export function reducePullEvent(state: PullState, event: PullEvent): PullState {
  const { status, id } = event;
  if (!status || !id || !LAYER_STATUSES.test(status)) return state;
  const previous = state.get(id) ?? { done: false, downloadedBytes: 0 };
  const layer: LayerProgress = { ...previous };
  const { current, total } = event.progressDetail ?? {};

  if (status === "Downloading") {
    if (typeof total === "number" && total > 0) layer.totalBytes = total;
    if (typeof current === "number") layer.downloadedBytes = current;
  } else if (status === "Download complete" || status === "Extracting" || status === "Pull complete") {
    // Extracting's current/total count unpacked bytes, not download; the download is finished.
    if (typeof total === "number" && total > 0 && layer.totalBytes === undefined) layer.totalBytes = total;
    if (layer.totalBytes !== undefined) layer.downloadedBytes = layer.totalBytes;
  }
  if (LAYER_DONE.test(status)) layer.done = true;

  const next = new Map(state);
  next.set(id, layer);
  return next;
}

export function summarizePull(state: PullState): PullProgress {
  const layers = [...state.values()];
  const progress: PullProgress = {
    layersDone: layers.filter((layer) => layer.done).length,
    layersTotal: layers.length,
  };
  const sized = layers.filter((layer) => layer.totalBytes !== undefined);
  if (sized.length > 0) {
    progress.bytesDone = sized.reduce((sum, layer) => sum + layer.downloadedBytes, 0);
    progress.bytesTotal = sized.reduce((sum, layer) => sum + (layer.totalBytes ?? 0), 0);
  }
  return progress;
}
