import type { EnvRow } from "./deploy-body";

let lastKey = 0;
/** A new, empty row; its key stays with it when rows above it are removed. */
export const newEnvRow = (): EnvRow => ({ key: ++lastKey, name: "", value: "" });

/** Environment variables as name and value rows, added and removed one at a time; an empty row is not sent. */
export function EnvRows({ rows, legend, onChange }: { rows: EnvRow[]; legend: string; onChange: (change: (rows: EnvRow[]) => EnvRow[]) => void }) {
  const update = (key: number, change: Partial<EnvRow>) => onChange((rs) => rs.map((r) => (r.key === key ? { ...r, ...change } : r)));
  return (
    <fieldset className="env">
      <legend>{legend}</legend>
      {rows.map((row, i) => (
        <div className="env-row" key={row.key}>
          <input
            aria-label={`Variable ${i + 1} name`}
            placeholder="NAME"
            autoComplete="off"
            spellCheck={false}
            value={row.name}
            onChange={(e) => update(row.key, { name: e.target.value })}
          />
          <input
            aria-label={`Variable ${i + 1} value`}
            placeholder="value"
            autoComplete="off"
            spellCheck={false}
            value={row.value}
            onChange={(e) => update(row.key, { value: e.target.value })}
          />
          <button
            type="button"
            className="secondary"
            aria-label={`Remove variable ${i + 1}`}
            onClick={() => onChange((rs) => rs.filter((r) => r.key !== row.key))}
          >
            Remove
          </button>
        </div>
      ))}
      <button type="button" className="secondary" onClick={() => onChange((rs) => [...rs, newEnvRow()])}>
        Add variable
      </button>
    </fieldset>
  );
}
