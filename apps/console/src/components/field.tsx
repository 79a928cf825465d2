import { type ReactNode, useId } from "react";

/**
 * A label and its control, tied by id rather than by nesting: a nested select's chosen option
 * would otherwise be read as part of its name ("Region Any").
 */
export function Field({ label, children }: { label: string; children: (id: string) => ReactNode }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children(id)}
    </div>
  );
}
