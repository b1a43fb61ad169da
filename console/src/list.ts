import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { asPage, type Page } from "./api.js";
import { ErrorBox, html, usePoll } from "./ui.js";

/**
 * A list the way the API pages it: `limit`, `sort` (createdAt or name, asc or
 * desc), `q`, and `cursor` from the previous page's `meta.nextCursor`. The
 * console keeps the cursors it followed, so Previous goes back exactly. The
 * current page is refreshed every poll.
 */
export type SortField = "createdAt" | "name";

export interface Column<T> {
  label: string;
  /** Sortable by the API under this field. */
  sort?: SortField;
  render: (item: T) => ComponentChildren;
  className?: string;
}

export interface ListQuery {
  limit: number;
  sort: string;
  cursor?: string;
  q?: string;
}

export interface PagedListProps<T> {
  /** A label for the table (screen readers) and the empty message. */
  label: string;
  load: (query: ListQuery) => Promise<T[] | Page<T>>;
  columns: Column<T>[];
  rowKey: (item: T) => string;
  /** Sorts the API accepts for this list (schedules: createdAt only). */
  sortFields?: SortField[];
  searchable?: boolean;
  /** Re-keys the list (a workspace switch resets paging). */
  deps?: unknown[];
  limit?: number;
}

export function PagedList<T>(props: PagedListProps<T>) {
  const { columns, label, rowKey } = props;
  const [sort, setSort] = useState("createdAt:desc");
  const [cursors, setCursors] = useState<string[]>([]);
  const [q, setQ] = useState("");
  const cursor = cursors[cursors.length - 1];
  const limit = props.limit ?? 20;
  const polled = usePoll(() => props.load({ limit, sort, cursor, q: q.length >= 2 ? q : undefined }).then(asPage), [sort, cursor, q, ...(props.deps ?? [])]);
  const page = polled.data;
  const allowed = props.sortFields ?? ["createdAt", "name"];

  const toggle = (field: SortField) => {
    const [current, dir] = sort.split(":");
    setSort(`${field}:${current === field && dir === "desc" ? "asc" : current === field ? "desc" : field === "name" ? "asc" : "desc"}`);
    setCursors([]);
  };
  const ariaSort = (field?: SortField) => {
    if (!field) return undefined;
    const [current, dir] = sort.split(":");
    return current === field ? (dir === "asc" ? "ascending" : "descending") : "none";
  };

  return html`<div class="list">
    ${
      props.searchable === false
        ? null
        : html`<div class="list-tools">
            <input
              type="search"
              aria-label=${`Search ${label}`}
              placeholder="Search (2+ characters)"
              value=${q}
              onInput=${(e: Event) => {
                setQ((e.currentTarget as HTMLInputElement).value);
                setCursors([]);
              }}
            />
          </div>`
    }
    <${ErrorBox} error=${polled.error} />
    <div class="table-wrap">
      <table aria-label=${label}>
        <thead>
          <tr>
            ${columns.map(
              (c) =>
                html`<th scope="col" class=${c.className} aria-sort=${c.sort && allowed.includes(c.sort) ? ariaSort(c.sort) : undefined}>
                  ${c.sort && allowed.includes(c.sort) ? html`<button class="sort" onClick=${() => toggle(c.sort!)}>${c.label}<span aria-hidden="true">${ariaSort(c.sort) === "ascending" ? " ▲" : ariaSort(c.sort) === "descending" ? " ▼" : ""}</span></button>` : c.label}
                </th>`,
            )}
          </tr>
        </thead>
        <tbody>
          ${page?.data.map(
            (item) =>
              html`<tr key=${rowKey(item)} data-row=${rowKey(item)}>
                ${columns.map((c) => html`<td class=${c.className}>${c.render(item)}</td>`)}
              </tr>`,
          )}
          ${
            page && page.data.length === 0
              ? html`<tr>
                  <td colspan=${columns.length} class="muted">No ${label.toLowerCase()}.</td>
                </tr>`
              : null
          }
          ${
            !page && polled.loading
              ? html`<tr>
                  <td colspan=${columns.length} class="muted">Loading…</td>
                </tr>`
              : null
          }
        </tbody>
      </table>
    </div>
    <nav class="pager" aria-label=${`${label} pages`}>
      <button disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>← Previous</button>
      <span class="muted">page ${cursors.length + 1}${page ? ` · ${page.meta.total} in all` : ""}</span>
      <button disabled=${!page?.meta.hasMore} onClick=${() => page && setCursors([...cursors, page.meta.nextCursor])}>Next →</button>
    </nav>
  </div>`;
}
