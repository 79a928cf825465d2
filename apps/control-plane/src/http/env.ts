import type { UserRow } from "@cm/db";
import type { AccessGrant } from "../services/auth-service";
import type { Logger } from "../services/logger";
import type { StreamHold } from "../services/stream-holds";

export type AppEnv = {
  Variables: {
    requestId: string;
    log: Logger;
    user: UserRow;
    /** What the request's access token grants: a connection that outlives the request ends with it. */
    grant: AccessGrant;
    /** Set by a streaming route once the stream may open: serverSentEvents ends the stream with it and gives its slot back. */
    streamHold?: StreamHold;
  };
};
