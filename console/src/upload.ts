import { errorFrom, encodePath, type Api } from "./api.js";

/**
 * Uploads a file into a sandbox through its agent's API: one PUT for a small
 * file, else the multipart API (initiate, parts, complete), as @blaxel/core
 * does above 5 MiB. XMLHttpRequest because fetch reports no upload progress.
 */
export const MULTIPART_THRESHOLD = 5 * 1024 * 1024;
export const PART_SIZE = 8 * 1024 * 1024;

export interface UploadTarget {
  api: Api;
  workspace: string;
  /** The sandbox URL: /sbx/{workspace}/{sandbox}. */
  base: string;
}

function send(target: UploadTarget, method: string, url: string, body: Blob, onProgress: (loaded: number) => void): Promise<string> {
  return target.api.headers({ workspace: target.workspace, raw: body }).then(
    (headers) =>
      new Promise<string>((resolve, reject) => {
        const xhr = new XMLHttpRequest();
        xhr.open(method, url);
        for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
        xhr.upload.onprogress = (e) => onProgress(e.loaded);
        xhr.onload = () => {
          if (xhr.status >= 200 && xhr.status < 300) resolve(xhr.responseText);
          else reject(errorFrom(xhr.status, xhr.responseText));
        };
        xhr.onerror = () => reject(new Error(`network error during ${method} ${url}`));
        xhr.send(body);
      }),
  );
}

export async function uploadFile(target: UploadTarget, path: string, file: Blob, onProgress: (loaded: number, total: number) => void): Promise<void> {
  const total = file.size;
  const encoded = encodePath(path);
  if (total <= MULTIPART_THRESHOLD) {
    await send(target, "PUT", `${target.base}/filesystem/${encoded}`, file, (loaded) => onProgress(loaded, total));
    onProgress(total, total);
    return;
  }
  const { api, workspace, base } = target;
  const { uploadId } = await api.json<{ uploadId: string }>("POST", `${base}/filesystem-multipart/initiate/${encoded}`, {
    workspace,
    body: { permissions: "0644" },
  });
  const parts: { partNumber: number; etag: string }[] = [];
  try {
    for (let offset = 0, partNumber = 1; offset < total; offset += PART_SIZE, partNumber++) {
      const chunk = file.slice(offset, Math.min(total, offset + PART_SIZE));
      const reply = await send(target, "PUT", `${base}/filesystem-multipart/${encodeURIComponent(uploadId)}/part?partNumber=${partNumber}`, chunk, (loaded) =>
        onProgress(offset + loaded, total),
      );
      parts.push({ partNumber, etag: (JSON.parse(reply) as { etag: string }).etag });
    }
    await api.json("POST", `${base}/filesystem-multipart/${encodeURIComponent(uploadId)}/complete`, { workspace, body: { parts } });
    onProgress(total, total);
  } catch (err) {
    // Leave nothing half-done behind in the sandbox.
    await api.json("DELETE", `${base}/filesystem-multipart/${encodeURIComponent(uploadId)}/abort`, { workspace }).catch(() => undefined);
    throw err;
  }
}
