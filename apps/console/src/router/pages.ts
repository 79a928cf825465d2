import type { ComponentType } from "react";

/**
 * What a page file under src/pages/ exports as `page`: the console finds every such file
 * by itself (routes.ts), so adding a page is adding one file, and no shared list is edited.
 */
export interface PageDefinition {
  /** The console path, with `:name` parameters ("/deployments/:id"); the page gets them as props. */
  path: string;
  /** The document title and, with `nav`, the navigation's label. */
  title: string;
  /** Shown in the navigation, in ascending order of this number; pages without it are reached by links. */
  nav?: number;
  /** Shown only to a signed-in wallet: others see the sign-in prompt instead. */
  signedIn?: boolean;
  component: ComponentType<{ params: Record<string, string> }>;
}
