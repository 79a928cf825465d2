import { useEffect, useRef, useState } from "react";

export interface ApiCall<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  /** Calls again now (after an action changed what it reads). */
  reload: () => void;
}

/**
 * Runs `fn` (an SDK call) whenever `key` changes (the call's inputs, e.g. JSON of its query),
 * and again every `pollMs` when given, keeping the last answer on screen while the next one
 * comes. Answers to calls made for an older key are dropped.
 */
export function useApiCall<T>(fn: () => Promise<T>, key: string, options: { pollMs?: number } = {}): ApiCall<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: true });
  const [round, setRound] = useState(0);
  // The newest fn, without making each render's new closure a reason to call again: `key` is.
  const latest = useRef(fn);
  latest.current = fn;
  const { pollMs } = options;

  // biome-ignore lint/correctness/useExhaustiveDependencies: key and round are what ask for a new call; fn is read through its ref
  useEffect(() => {
    let current = true;
    const call = () => {
      setState((s) => ({ ...s, loading: true }));
      latest.current().then(
        (data) => current && setState({ data, error: undefined, loading: false }),
        (error: unknown) => current && setState((s) => ({ data: s.data, error, loading: false })),
      );
    };
    call();
    const timer = pollMs ? setInterval(call, pollMs) : undefined;
    return () => {
      current = false;
      clearInterval(timer);
    };
  }, [key, round, pollMs]);

  return { ...state, reload: () => setRound((n) => n + 1) };
}
