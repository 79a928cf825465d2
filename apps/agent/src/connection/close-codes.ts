// What each fatal close code means for the operator, as one clear log line.
import { CLOSE_CODES, PROTOCOL_VERSIONS } from "@cm/protocol";

/** Why the agent stopped trying, and what the operator should do about it. */
export function explainFatalClose(code: number, reason: string): string {
  const detail = reason ? ` (the control plane said: ${reason})` : "";
  switch (code) {
    case CLOSE_CODES.UNAUTHORIZED:
      return `the control plane rejected this agent's token (close ${code})${detail}. Check AGENT_TOKEN in the agent's config; the agent will not retry until it is restarted with a valid token.`;
    case CLOSE_CODES.REPLACED:
      return `another agent using the same token connected and took over this node (close ${code})${detail}. This agent stops so the two do not fight; make sure only one machine uses this token, then restart it.`;
    case CLOSE_CODES.RETIRED:
      return `the operator retired this node (close ${code})${detail}. The agent removes the containers and network sandboxes it made for the node and stops; enrol the machine again (cm operator add) to offer it again.`;
    case CLOSE_CODES.UNSUPPORTED_PROTOCOL:
      return `the control plane does not speak any protocol version this agent knows (${PROTOCOL_VERSIONS.join(", ")}) (close ${code})${detail}. Upgrade the agent.`;
    default:
      return `the control plane closed the connection with code ${code}${detail} and asked the agent not to retry.`;
  }
}
