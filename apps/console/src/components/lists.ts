import type { NodeListQuery, TemplateListQuery } from "@cm/sdk";

/*
 * The choices the console offers for the API's enumerations. The SDK exports their types,
 * not the lists: each list below must name every member of its type, or the typecheck
 * fails (`Exhaustive`), so a region the API adds cannot silently be missing from a filter.
 */
type Exhaustive<Union, List extends readonly Union[]> = [Exclude<Union, List[number]>] extends [never] ? List : never;

export type Region = NonNullable<NodeListQuery["region"]>;
export type NodeStatus = NonNullable<NodeListQuery["status"]>;
export type TemplateCategory = NonNullable<TemplateListQuery["category"]>;

const regions = ["us-east", "us-west", "eu-west", "eu-central", "asia-east", "asia-south"] as const;
export const REGIONS: Exhaustive<Region, typeof regions> = regions;

const statuses = ["online", "maintenance", "offline"] as const;
export const NODE_STATUSES: Exhaustive<NodeStatus, typeof statuses> = statuses;

const categories = ["llm", "image", "notebook", "utility", "custom"] as const;
export const TEMPLATE_CATEGORIES: Exhaustive<TemplateCategory, typeof categories> = categories;

export const CATEGORY_LABELS: Record<TemplateCategory, string> = {
  llm: "Language models",
  image: "Image generation",
  notebook: "Notebooks",
  utility: "Utilities",
  custom: "Custom",
};
