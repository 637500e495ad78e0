// The runs page: every run of the store (and the trace files `opsight ui` was given),
// searchable by text, tag and date, sortable; a run can be tagged and untagged (PUT and
// DELETE /api/runs/RUN/tags/KEY) and deleted; two checked runs open the comparison. A run
// with many tags (a remote benchmark has a dozen per worker, docs/remote.md) shows its
// first FOLDED_TAGS and a "+N more" button that unfolds the rest.

import { apiFetch, runPath, type RunEntry, type RunsAnswer } from "../api";
import { h } from "../dom";
import { formatCount, formatDuration, formatUnixTime } from "../format";
import { routeHref } from "../router";
import { sortableTable } from "../table";

// Tags a run shows before its "+N more" button.
export const FOLDED_TAGS = 12;

export async function runsPage(root: HTMLElement, query: Record<string, string>): Promise<void> {
  const search = h("input", { type: "search", placeholder: "search name, command, tag", value: query.q ?? "", id: "run-search" });
  const tag = h("input", { type: "text", placeholder: "tag k or k=v", value: query.tag ?? "", id: "run-tag" });
  const since = h("input", { type: "date", value: query.since ?? "", id: "run-since", title: "created on or after" });
  const until = h("input", { type: "date", value: query.until ?? "", id: "run-until", title: "created before" });
  const compareButton = h("button", { disabled: true, id: "compare-selected" }, "Compare the 2 selected runs");
  const listing = h("div", { id: "runs-listing" });
  const status = h("p", { class: "status" });
  const selected = new Set<string>();
  const unfolded = new Set<string>(); // runs whose tags are all shown

  const apply = () => {
    const params = new URLSearchParams();
    for (const [key, input] of [["q", search], ["tag", tag], ["since", since], ["until", until]] as const)
      if (input.value) params.set(key, input.value);
    const text = params.toString();
    history.replaceState(null, "", `#/runs${text ? `?${text}` : ""}`);
    void load();
  };
  for (const input of [search, tag, since, until]) input.addEventListener("change", apply);
  search.addEventListener("keyup", (event) => {
    if (event.key === "Enter") apply();
  });
  compareButton.addEventListener("click", () => {
    const [a, b] = [...selected];
    location.hash = routeHref({ page: "compare", a, b });
  });

  root.replaceChildren(
    h("h1", {}, "Runs"),
    h("div", { class: "toolbar" }, search, tag, h("label", {}, "since ", since), h("label", {}, "until ", until), compareButton),
    status,
    listing,
  );

  async function load(): Promise<void> {
    const answer = await apiFetch<RunsAnswer>("runs", {
      q: search.value || undefined,
      tag: tag.value || undefined,
      since: since.value || undefined,
      until: until.value || undefined,
    });
    status.textContent = answer.store_problem
      ? answer.store_problem
      : `${answer.runs.length} run${answer.runs.length === 1 ? "" : "s"} in ${answer.store_path}`;
    const checkbox = (run: RunEntry) =>
      h("input", {
        type: "checkbox",
        checked: selected.has(run.ref),
        data: { ref: run.ref },
        on: {
          click: (event) => event.stopPropagation(),
          change: (event) => {
            if ((event.target as HTMLInputElement).checked) selected.add(run.ref);
            else selected.delete(run.ref);
            compareButton.disabled = selected.size !== 2;
          },
        },
      });
    const removeButton = (run: RunEntry) =>
      run.kind === "run"
        ? h(
            "button",
            {
              class: "small",
              title: `delete run ${run.ref}`,
              on: {
                click: async (event) => {
                  event.stopPropagation();
                  if (!confirm(`Delete run ${run.ref} (${run.name || "unnamed"}) from the store?`)) return;
                  await apiFetch(runPath(run.ref), {}, "DELETE");
                  selected.delete(run.ref);
                  await load();
                },
              },
            },
            "delete",
          )
        : "";
    const tagEditor = (run: RunEntry) => {
      const text = (key: string, value: string) => (value ? `${key}=${value}` : key);
      const chips: HTMLElement[] = Object.entries(run.tags ?? {}).map(([key, value]) =>
        h(
          "span",
          { class: "tag", data: { key } },
          text(key, value),
          run.kind === "run"
            ? h(
                "button",
                {
                  class: "tag-remove",
                  title: `remove the tag ${key}`,
                  on: {
                    click: async (event) => {
                      event.stopPropagation();
                      await apiFetch(runPath(run.ref, `/tags/${encodeURIComponent(key)}`), {}, "DELETE");
                      await load();
                    },
                  },
                },
                "×",
              )
            : "",
        ),
      );
      if (chips.length > FOLDED_TAGS) {
        const hidden = chips.slice(FOLDED_TAGS);
        const more = h("button", { class: "tag-more", title: "show or hide the other tags" });
        const show = (all: boolean) => {
          for (const chip of hidden) chip.hidden = !all;
          more.textContent = all ? "fewer tags" : `+${hidden.length} more`;
          if (all) unfolded.add(run.ref);
          else unfolded.delete(run.ref);
        };
        more.addEventListener("click", (event) => {
          event.stopPropagation();
          show(!unfolded.has(run.ref));
        });
        show(unfolded.has(run.ref));
        chips.push(more);
      }
      if (run.kind !== "run") return h("span", {}, ...chips);
      const input = h("input", { type: "text", class: "tag-add", placeholder: "+ tag k=v", data: { ref: run.ref } });
      input.addEventListener("keyup", async (event) => {
        if (event.key !== "Enter" || !input.value.trim()) return;
        const [key, value] = parseTag(input.value);
        try {
          if (!key || key.includes("/")) throw new Error(`a tag key may be neither empty nor hold '/': '${key}'`);
          await apiFetch(runPath(run.ref, `/tags/${encodeURIComponent(key)}`), { value }, "PUT");
          await load();
        } catch (failure) {
          input.setCustomValidity(String((failure as Error).message));
          input.title = String((failure as Error).message);
          input.classList.add("invalid");
        }
      });
      return h("span", { class: "tags" }, ...chips, input);
    };
    const rows = [...answer.runs, ...answer.files];
    listing.replaceChildren(
      sortableTable<RunEntry>(
        [
          { title: "", value: () => "", render: checkbox },
          { title: "id", value: (run) => run.id ?? -1, render: (run) => run.ref, numeric: true },
          {
            title: "name",
            className: "name",
            value: (run) => run.name,
            render: (run) => h("a", { href: routeHref({ page: "overview", run: run.ref }), class: "run-link" }, run.name || "(unnamed)"),
          },
          { title: "created (UTC)", value: (run) => run.created_unix_ns ?? 0, render: (run) => formatUnixTime(run.created_unix_ns ?? 0) },
          { title: "duration", value: (run) => run.duration_ns ?? 0, render: (run) => (run.duration_ns ? formatDuration(run.duration_ns) : ""), numeric: true },
          { title: "slices", value: (run) => run.slices ?? 0, render: (run) => (run.slices !== undefined ? formatCount(run.slices) : ""), numeric: true },
          {
            title: "command",
            className: "command",
            value: (run) => run.command ?? run.path ?? "",
            render: (run) => h("span", { class: "command", title: run.command ?? run.path ?? "" }, run.command ?? run.path ?? ""),
          },
          { title: "tags", className: "tags", value: (run) => Object.entries(run.tags ?? {}).map(([k, v]) => `${k}=${v}`).join(" "), render: tagEditor },
          { title: "", value: () => "", render: removeButton },
        ],
        rows,
        { className: "data runs" },
      ),
    );
  }
  await load();
}

// "k=v" as key and value ("k" alone: an empty value), split at the first "=".
export function parseTag(text: string): [string, string] {
  const trimmed = text.trim();
  const at = trimmed.indexOf("=");
  return at < 0 ? [trimmed, ""] : [trimmed.slice(0, at).trim(), trimmed.slice(at + 1).trim()];
}
