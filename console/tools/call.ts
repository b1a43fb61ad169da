/** A JSON call to a simulator with a bearer key, for the screenshot script and the browser tests' set-up. */
export function apiCaller(base: () => string, key: string) {
  return async (method: string, path: string, body?: unknown, bearer = key, workspace = "default"): Promise<any> => {
    const res = await fetch(base() + path, {
      method,
      headers: {
        Authorization: `Bearer ${bearer}`,
        "X-Blaxel-Workspace": workspace,
        "Blaxel-Version": "2026-04-28",
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
}
