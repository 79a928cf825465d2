export * from "./errors";
export * from "./api/common";
export * from "./api/auth";
export * from "./api/nodes";
export * from "./api/templates";
export * from "./api/deployments";
export * from "./api/credits";
export * from "./deployment-states";
