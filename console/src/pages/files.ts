import { useState } from "preact/hooks";
import { encodePath } from "../api.js";
import { uploadFile } from "../upload.js";
import { ErrorBox, formatBytes, html, Section, Time, useAction, useApp, usePoll } from "../ui.js";

/** A sandbox's files through its agent: browse, view text, download, upload (progress bar), new folder, delete. */

interface Entry {
  path: string;
  name: string;
  size?: number;
  lastModified?: string;
  permissions?: string;
}

interface Listing {
  path: string;
  files?: Entry[];
  subdirectories?: Entry[];
}

interface FileRead extends Entry {
  content?: string;
}

const VIEW_LIMIT = 1024 * 1024;
const join = (dir: string, name: string) => `${dir.replace(/\/$/, "")}/${name}`;

export function FilesTab({ base }: { base: string }) {
  const { api, workspace } = useApp();
  const [dir, setDir] = useState("/");
  const [viewing, setViewing] = useState<FileRead | undefined>();
  const [progress, setProgress] = useState<{ name: string; loaded: number; total: number } | undefined>();
  const action = useAction();
  const listing = usePoll(() => api.get<Listing>(`${base}/filesystem/${encodePath(dir)}`, { workspace }), [base, dir], 3000);
  const url = (path: string) => `${base}/filesystem/${encodePath(path)}`;

  const open = (entry: Entry) =>
    void action.run(async () => {
      if ((entry.size ?? 0) > VIEW_LIMIT) throw new Error(`${entry.name} is ${formatBytes(entry.size)}: download it instead`);
      setViewing(await api.get<FileRead>(url(entry.path), { workspace }));
    });
  const download = (entry: Entry) =>
    void action.run(async () => {
      const res = await api.fetch("GET", url(entry.path), { workspace, headers: { Accept: "application/octet-stream" } });
      const href = URL.createObjectURL(await res.blob());
      const a = document.createElement("a");
      a.href = href;
      a.download = entry.name;
      a.click();
      setTimeout(() => URL.revokeObjectURL(href), 10_000);
    });
  const remove = (entry: Entry, isDir: boolean) => {
    if (!confirm(`Delete ${entry.path}${isDir ? " and everything in it" : ""}?`)) return;
    void action.run(async () => {
      await api.json("DELETE", url(entry.path), { workspace, query: isDir ? { recursive: true } : undefined });
      listing.reload();
    });
  };
  const upload = (event: Event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const file = (form.elements.namedItem("file") as HTMLInputElement).files?.[0];
    if (!file) return;
    void action.run(async () => {
      setProgress({ name: file.name, loaded: 0, total: file.size });
      try {
        await uploadFile({ api, workspace, base }, join(dir, file.name), file, (loaded, total) => setProgress({ name: file.name, loaded, total }));
      } finally {
        setProgress(undefined);
      }
      form.reset();
      listing.reload();
    });
  };
  const mkdir = (event: Event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const name = String(new FormData(form).get("folder") ?? "").trim();
    if (!name) return;
    void action.run(async () => {
      await api.json("PUT", url(join(dir, name)), { workspace, body: { isDirectory: true } });
      form.reset();
      listing.reload();
    });
  };

  const segments = dir.split("/").filter(Boolean);
  const data = listing.data;
  return html`<div class="files">
    <${Section} title="Files">
      <nav class="path" aria-label="Folder">
        <button class="linkish" onClick=${() => setDir("/")}>/</button>
        ${segments.map((s, i) => html`<button class="linkish" onClick=${() => setDir(`/${segments.slice(0, i + 1).join("/")}`)}>${s}/</button>`)}
      </nav>
      <div class="file-tools">
        <form class="inline-form" onSubmit=${upload}>
          <label>Upload to ${dir} <input name="file" type="file" required /></label>
          <button type="submit" disabled=${action.busy}>Upload</button>
        </form>
        <form class="inline-form" onSubmit=${mkdir}>
          <label>New folder <input name="folder" placeholder="name" /></label>
          <button type="submit" disabled=${action.busy}>Create</button>
        </form>
      </div>
      ${
        progress
          ? html`<div class="progress">
              <label
                >Uploading ${progress.name}: ${formatBytes(progress.loaded)} of ${formatBytes(progress.total)}
                <progress max=${progress.total} value=${progress.loaded}></progress
              ></label>
            </div>`
          : null
      }
      <${ErrorBox} error=${listing.error} /><${ErrorBox} error=${action.error} />
      <div class="table-wrap">
        <table aria-label="Files">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Size</th>
              <th scope="col">Modified</th>
              <th scope="col">Mode</th>
              <th scope="col"><span class="sr-only">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            ${
              dir !== "/"
                ? html`<tr>
                    <td><button class="linkish" onClick=${() => setDir(`/${segments.slice(0, -1).join("/")}`)}>..</button></td>
                    <td></td>
                    <td></td>
                    <td></td>
                    <td></td>
                  </tr>`
                : null
            }
            ${data?.subdirectories?.map(
              (d) =>
                html`<tr data-file=${d.name}>
                  <td>
                    <button
                      class="linkish"
                      onClick=${() => {
                        setDir(d.path);
                        setViewing(undefined);
                      }}
                    >
                      ${d.name}/
                    </button>
                  </td>
                  <td></td>
                  <td></td>
                  <td></td>
                  <td class="row-actions"><button class="small danger" onClick=${() => remove(d, true)}>Delete</button></td>
                </tr>`,
            )}
            ${data?.files?.map(
              (f) =>
                html`<tr data-file=${f.name}>
                  <td><button class="linkish" onClick=${() => open(f)}>${f.name}</button></td>
                  <td>${formatBytes(f.size)}</td>
                  <td><${Time} iso=${f.lastModified} /></td>
                  <td><code>${f.permissions}</code></td>
                  <td class="row-actions">
                    <button class="small" onClick=${() => download(f)}>Download</button>
                    <button class="small danger" onClick=${() => remove(f, false)}>Delete</button>
                  </td>
                </tr>`,
            )}
            ${
              data && !data.files?.length && !data.subdirectories?.length
                ? html`<tr>
                    <td colspan="5" class="muted">Empty folder.</td>
                  </tr>`
                : null
            }
          </tbody>
        </table>
      </div>
    <//>
    ${
      viewing
        ? html`<${Section} title=${viewing.path} actions=${html`<button class="small" onClick=${() => setViewing(undefined)}>Close</button>`}>
            <pre class="viewer" tabindex="0">${viewing.content}</pre>
          <//>`
        : null
    }
  </div>`;
}
