/** What the runtime needs from a logger; pino, console and the agent's own logger all fit. */
export interface RuntimeLogger {
  debug(message: string, context?: Record<string, unknown>): void;
  warn(message: string, context?: Record<string, unknown>): void;
}

export const silentLogger: RuntimeLogger = {
  debug: () => {},
  warn: () => {},
};
