// Tables of numbers, sortable by a click on a column's header. A numeric cell keeps the
// exact value the API gave in data-value (what the browser tests compare with
// `opsight report --format json`) and shows it formatted.

import { h, type Child } from "./dom";

export interface Column<T> {
  title: string;
  value: (row: T) => number | string;
  render?: (row: T) => Child;
  numeric?: boolean;
  className?: string; // on the column's header and cells ("name": a long name wraps, style.css)
}

export function sortableTable<T>(
  columns: Column<T>[],
  rows: T[],
  options: { initialSort?: number; onRowClick?: (row: T) => void; rowClass?: (row: T) => string; className?: string } = {},
): HTMLTableElement {
  let sortColumn = options.initialSort ?? -1;
  let descending = true;
  const body = h("tbody");
  const table = h("table", { class: options.className ?? "data" });
  const header = h("tr");
  columns.forEach((column, index) => {
    header.appendChild(
      h(
        "th",
        {
          class: [column.numeric ? "numeric sortable" : "sortable", column.className ?? ""].join(" ").trim(),
          on: {
            click: () => {
              descending = sortColumn === index ? !descending : !!column.numeric;
              sortColumn = index;
              fill();
            },
          },
        },
        column.title,
      ),
    );
  });
  table.appendChild(h("thead", {}, header));
  table.appendChild(body);
  function fill(): void {
    const ordered = [...rows];
    if (sortColumn >= 0) {
      const column = columns[sortColumn];
      ordered.sort((a, b) => {
        const x = column.value(a);
        const y = column.value(b);
        const order = x < y ? -1 : x > y ? 1 : 0;
        return descending ? -order : order;
      });
    }
    body.replaceChildren(
      ...ordered.map((row) => {
        const tr = h("tr", { class: options.rowClass?.(row) ?? "" });
        if (options.onRowClick) {
          tr.classList.add("clickable");
          tr.addEventListener("click", () => options.onRowClick?.(row));
        }
        for (const column of columns) {
          const value = column.value(row);
          tr.appendChild(
            h(
              "td",
              { class: [column.numeric ? "numeric" : "", column.className ?? ""].join(" ").trim(), data: column.numeric ? { value: String(value) } : undefined },
              column.render ? column.render(row) : String(value),
            ),
          );
        }
        return tr;
      }),
    );
  }
  fill();
  return table;
}
