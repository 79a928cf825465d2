import type { UserRow } from "@cm/db";
import type { Logger } from "../services/logger";

export type AppEnv = {
  Variables: {
    requestId: string;
    log: Logger;
    user: UserRow;
  };
};
