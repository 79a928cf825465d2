import { type Client, createClient } from "@cm/sdk";
import type { Parsed } from "./args";
import { defaultKeypairPath, readKeypair } from "./keypair";
import type { Output } from "./output";
import { configDir, FileSessionStore } from "./session-file";

/** What every command gets: where to write, which API, the client, the keypair when it needs one. */
export interface Context {
  api: string;
  json: boolean;
  rpcUrl: string | undefined;
  keypairPath: string;
  out: Output;
  client: Client;
  store: FileSessionStore;
  signer(): ReturnType<typeof readKeypair>;
  /** Aborted on Ctrl-C: long commands (deploy --wait, logs -f) end cleanly. */
  signal: AbortSignal;
}

export function createContext(flags: Parsed["flags"], env: NodeJS.ProcessEnv, out: Output, signal: AbortSignal): Context {
  const api = (typeof flags.api === "string" ? flags.api : env.CM_API_URL) || "http://127.0.0.1:8080";
  const keypairPath = (typeof flags.keypair === "string" ? flags.keypair : env.CM_KEYPAIR) || defaultKeypairPath();
  const store = new FileSessionStore(configDir(env), api);
  return {
    api,
    json: flags.json === true,
    rpcUrl: (typeof flags.rpc === "string" ? flags.rpc : env.SOLANA_RPC_URL) || undefined,
    keypairPath,
    out,
    store,
    // An API key in the environment stands in for the stored session (a script's, CI's): cm login's session is not read.
    client: createClient({ baseUrl: api, store, ...(env.CM_API_KEY ? { apiKey: env.CM_API_KEY } : {}) }),
    signer: () => readKeypair(keypairPath),
    signal,
  };
}
