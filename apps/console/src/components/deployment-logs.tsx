import type { LogEntry } from "@cm/sdk";
import { type ReactNode, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import { useApi } from "../api/api-context";
import { ErrorNotice } from "../layout/error-notice";
import { Field } from "./field";
import { LogBuffer } from "./log-buffer";

/** Each row's height in px (the CSS's .log-line): rows are placed by index, so only those in view are drawn. */
const ROW_PX = 20;
/** Rows drawn above and below the view, so a scroll shows no gap before the next frame. */
const OVERSCAN = 20;
/** The last lines the stream starts with. */
const TAIL = 1_000;

function highlighted(text: string, query: string): ReactNode {
  if (!query) return text;
  const lower = text.toLowerCase();
  const parts: ReactNode[] = [];
  let from = 0;
  for (let at = lower.indexOf(query, from); at >= 0; at = lower.indexOf(query, from)) {
    if (at > from) parts.push(text.slice(from, at));
    parts.push(<mark key={at}>{text.slice(at, at + query.length)}</mark>);
    from = at + query.length;
  }
  if (from < text.length) parts.push(text.slice(from));
  return parts;
}

/**
 * A deployment's logs, live: the SDK's follow (the logs stream, resuming by itself) into a
 * bounded buffer; the view draws at most once per animation frame, and only the rows in
 * view, so a thousand lines a second cost a frame's work, not a thousand renders. Pause
 * freezes the view (lines keep arriving into the buffer); search highlights, or shows
 * only the lines that match; download saves the lines loaded here.
 */
export function DeploymentLogs({ id, live }: { id: string; live: boolean }) {
  const api = useApi();
  const [buffer] = useState(() => new LogBuffer());
  const [version, setVersion] = useState(0);
  const [frozen, setFrozen] = useState<readonly LogEntry[] | undefined>();
  const [query, setQuery] = useState("");
  const [onlyMatching, setOnlyMatching] = useState(true);
  const [streaming, setStreaming] = useState(false);
  const [error, setError] = useState<unknown>();
  const [scrollTop, setScrollTop] = useState(0);
  const [viewHeight, setViewHeight] = useState(400);
  const view = useRef<HTMLDivElement>(null);
  // Whether new lines scroll the view: true until its reader scrolls up, true again back at the bottom.
  const [pinned, setPinned] = useState(true);
  const atBottom = useRef(true);
  /** Where this view last scrolled itself: a scroll event there is its own, not its reader's. */
  const selfScrolled = useRef(-1);
  const frame = useRef<number | undefined>(undefined);
  const frozenAt = useRef(0);

  // One render per animation frame, whatever number of lines came in it.
  const schedule = useCallback(() => {
    if (frame.current !== undefined) return;
    frame.current = requestAnimationFrame(() => {
      frame.current = undefined;
      setVersion(buffer.version);
    });
  }, [buffer]);
  useEffect(() => () => cancelAnimationFrame(frame.current ?? 0), []);

  // Follow while the deployment is live; once it has ended the stream gives its last lines and ends.
  // Started again (live once more), the stream is read again: lines already held are skipped by seq.
  // biome-ignore lint/correctness/useExhaustiveDependencies: live changing is what asks for a new stream
  useEffect(() => {
    const ctrl = new AbortController();
    setStreaming(true);
    setError(undefined);
    void (async () => {
      try {
        for await (const line of api.deployments.follow(id, { tail: TAIL, signal: ctrl.signal })) {
          if (buffer.push(line)) schedule();
        }
      } catch (err) {
        if (!ctrl.signal.aborted) setError(err);
      } finally {
        if (!ctrl.signal.aborted) setStreaming(false);
      }
    })();
    return () => ctrl.abort();
  }, [api, id, live, buffer, schedule]);

  const needle = query.trim().toLowerCase();
  // biome-ignore lint/correctness/useExhaustiveDependencies: version says the buffer changed (it is mutated in place)
  const shown = useMemo(() => {
    const all = frozen ?? buffer.lines();
    return needle && onlyMatching ? all.filter((l) => l.message.toLowerCase().includes(needle)) : all;
  }, [version, frozen, needle, onlyMatching, buffer]);

  // New lines keep the view at the bottom, unless its reader scrolled up to read.
  // biome-ignore lint/correctness/useExhaustiveDependencies: new lines (version: the buffer is the same array, grown) are the reason to scroll
  useLayoutEffect(() => {
    const el = view.current;
    if (!el || !atBottom.current) return;
    el.scrollTop = el.scrollHeight;
    selfScrolled.current = el.scrollTop;
  }, [shown, version]);

  useEffect(() => {
    const el = view.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setViewHeight(el.clientHeight));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  const onScroll = () => {
    const el = view.current;
    if (!el) return;
    // Lines that came between this view's own scroll and its event would read as the reader scrolling up.
    if (Math.abs(el.scrollTop - selfScrolled.current) > 1) {
      atBottom.current = el.scrollTop + el.clientHeight >= el.scrollHeight - ROW_PX;
      setPinned(atBottom.current);
    }
    setScrollTop(el.scrollTop);
  };

  const first = Math.max(0, Math.floor(scrollTop / ROW_PX) - OVERSCAN);
  const last = Math.min(shown.length, Math.ceil((scrollTop + viewHeight) / ROW_PX) + OVERSCAN);
  const rows = [];
  for (let i = first; i < last; i++) {
    const l = shown[i]!;
    rows.push(
      <div key={l.seq} className={`log-line log-${l.stream}`} style={{ top: i * ROW_PX }} data-seq={l.seq}>
        {highlighted(l.message, needle)}
      </div>,
    );
  }
  // version counts the lines taken, so what came since the pause is the difference.
  const waiting = frozen ? buffer.version - frozenAt.current : 0;

  const download = () => {
    const blob = new Blob([buffer.toText()], { type: "text/plain" });
    const url = URL.createObjectURL(blob);
    const a = document.createElement("a");
    a.href = url;
    a.download = `${id}-logs.txt`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  };

  return (
    <section className="deployment-logs" aria-labelledby="logs-heading">
      <div className="section-head">
        <h2 id="logs-heading">Logs</h2>
        <p className="logs-state">
          {frozen ? "Paused" : streaming ? "Following" : "Not following: the deployment is not running"}
          {" · "}
          {buffer.length} {buffer.length === 1 ? "line" : "lines"} loaded
          {needle && onlyMatching ? `, ${shown.length} matching` : ""}
          {frozen && waiting > 0 ? `, ${waiting} new since paused` : ""}
        </p>
      </div>
      <div className="logs-tools">
        <button
          type="button"
          aria-pressed={frozen !== undefined}
          onClick={() => {
            frozenAt.current = buffer.version;
            setFrozen(frozen ? undefined : buffer.lines().slice());
          }}
        >
          {frozen ? "Resume" : "Pause"}
        </button>
        <Field label="Search logs">{(fid) => <input id={fid} type="search" value={query} onChange={(e) => setQuery(e.target.value)} />}</Field>
        <label className="check">
          <input type="checkbox" checked={onlyMatching} onChange={(e) => setOnlyMatching(e.target.checked)} /> Only matching lines
        </label>
        <button type="button" onClick={download} disabled={buffer.length === 0}>
          Download
        </button>
        {!pinned && (
          <button
            type="button"
            onClick={() => {
              atBottom.current = true;
              setPinned(true);
              const el = view.current;
              if (el) el.scrollTop = el.scrollHeight;
            }}
          >
            Jump to the newest line
          </button>
        )}
      </div>
      <ErrorNotice error={error} />
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: the log scrolls, and a keyboard must reach it to scroll it */}
      <div ref={view} className="log-view" role="log" aria-live="off" aria-label="Log lines" tabIndex={0} onScroll={onScroll}>
        <div className="log-rows" style={{ height: shown.length * ROW_PX }}>
          {rows}
        </div>
        {shown.length === 0 && <p className="log-empty">{needle && onlyMatching ? "No line matches." : "No lines yet."}</p>}
      </div>
    </section>
  );
}
