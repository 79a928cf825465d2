export { needs } from "./needs";
export type { Needs, Piece } from "./needs";
export { describeEachDatabase } from "./databases";
export { sqliteDatabase, type TestDatabase } from "@cm/db/testing";
