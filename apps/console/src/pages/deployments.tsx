import type { PageDefinition } from "../router/pages";

// A placeholder: issue 42's deployments page is built here (this file is the page's own).
function Deployments() {
  return (
    <>
      <h1>Deployments</h1>
      <p>This page is not built yet.</p>
    </>
  );
}

export const page: PageDefinition = { path: "/deployments", title: "Deployments", nav: 40, signedIn: true, component: Deployments };
