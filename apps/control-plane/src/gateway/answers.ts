/** Who answered an endpoint request: the tenant's container, or the gateway with a page of its own (unknown host, node away, timeout). */
export type AnswerSource = "container" | "gateway";

/**
 * Endpoint requests the gateway answered, by status class and by who answered:
 * what /metrics shows (cm_gateway_requests_total). Counted once per response
 * head sent to the visitor, whichever path carried it (the byte relay, Node's
 * HTTP server for a connection that began with an API request, an upgrade).
 */
export class GatewayAnswers {
  private readonly counts = new Map<string, number>();

  add(source: AnswerSource, status: number) {
    const key = `${source} ${statusClass(status)}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** Each (source, status class) seen, with its count. */
  entries(): Array<{ source: AnswerSource; status: string; count: number }> {
    return [...this.counts].map(([key, count]) => {
      const [source, status] = key.split(" ") as [AnswerSource, string];
      return { source, status, count };
    });
  }
}

/** Pure: "2xx" for 204, "5xx" for 502. */
export const statusClass = (status: number) => `${Math.floor(status / 100)}xx`;
