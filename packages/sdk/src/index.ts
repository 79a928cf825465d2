export type { BuyOptions, Payer } from "./chain";
export { type Client, createClient } from "./client";
export { ApiError, ChainError, CmError, NetworkError, SessionError, WaitError } from "./errors";
export { ExecError, type ExecOptions, type ExecSession, type WebSocketConstructor, type WebSocketLike } from "./exec";
export { ENDED_STATUSES, type FollowOptions, hasEnded, type PollOptions, type WaitOptions } from "./follow";
export { MemorySessionStore, type Session, type SessionStore } from "./session";
export { keypairSigner, type Signer, walletAddress } from "./signer";
export type { ClientOptions } from "./transport";
export type * from "./types";
