import type { PageDefinition } from "../router/pages";

// A placeholder: issue 42's operator page is built here (this file is the page's own).
function Operator() {
  return (
    <>
      <h1>Operator</h1>
      <p>This page is not built yet.</p>
    </>
  );
}

export const page: PageDefinition = { path: "/operator", title: "Operator", nav: 60, signedIn: true, component: Operator };
