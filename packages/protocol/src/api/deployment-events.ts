import { z } from "zod";

/*
 * GET /deployments/:id/events: Server-Sent Events. Each event is a message whose
 * data is the Deployment as GET /deployments/:id answers it: the current state
 * first, then the deployment each time something in it changes. It ends as the
 * logs stream does (LOG_STREAM_END_EVENT with a LogStreamEnd, a comment every
 * LOG_STREAM_KEEP_ALIVE_MS), once the deployment is stopped, exited, failed or deleted.
 */
export const DeploymentEventsHeaders = z.object({
  "last-event-id": z
    .string()
    .regex(/^\d{1,15}$/, "must be the id of an event this stream sent")
    .optional()
    .meta({
      description:
        "The id of the last event read (browsers' EventSource sends it by itself on reconnect): the ids go on from it, and the current state comes first again, so nothing is missed",
    }),
});
