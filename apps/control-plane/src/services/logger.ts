import pino from "pino";

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";
export type Fields = Record<string, unknown>;

/** Message first, then fields; `child` binds fields (a request, node or deployment id) to every line it writes. */
export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  child(fields: Fields): Logger;
}

/**
 * JSON lines on stderr (`{level, time, name, msg, ...fields}`): readable by
 * people, parseable by a log shipper. An Error under `err` is written with its
 * stack; one under any other key as its message.
 */
export function createLogger(level: LogLevel, name = "control-plane", destination: pino.DestinationStream = pino.destination({ dest: 2, sync: true })): Logger {
  return wrap(
    pino(
      {
        level,
        base: { name },
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }), log: errorsAsMessages },
      },
      destination,
    ),
  );
}

function wrap(p: pino.Logger): Logger {
  return {
    debug: (msg, fields) => p.debug(fields ?? {}, msg),
    info: (msg, fields) => p.info(fields ?? {}, msg),
    warn: (msg, fields) => p.warn(fields ?? {}, msg),
    error: (msg, fields) => p.error(fields ?? {}, msg),
    child: (fields) => wrap(p.child(fields)),
  };
}

/** pino serializes `err` (with its stack); an Error anywhere else would be written as `{}`. */
function errorsAsMessages(fields: Fields): Fields {
  let out = fields;
  for (const [key, value] of Object.entries(fields)) {
    if (key !== "err" && value instanceof Error) {
      if (out === fields) out = { ...fields };
      out[key] = value.message;
    }
  }
  return out;
}
