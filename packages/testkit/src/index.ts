export { sqliteDatabase, type TestDatabase } from "@cm/db/testing";
export { describeEachDatabase } from "./databases";
export type { Needs, Piece } from "./needs";
export { needs } from "./needs";
