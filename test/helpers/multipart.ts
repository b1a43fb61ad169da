import { createHash } from "node:crypto";
import request from "supertest";

export const md5 = (data: Buffer | string) => createHash("md5").update(data).digest("hex");

/** A supertest client for one agent, with the agent's token attached when it has one. */
export function agentClient(url: string, token?: string) {
  const auth = (r: request.Test) => (token ? r.set("X-Blaxel-Authorization", `Bearer ${token}`) : r);
  const agent = request(url);
  return {
    get: (path: string) => auth(agent.get(path)),
    put: (path: string) => auth(agent.put(path)),
    post: (path: string) => auth(agent.post(path)),
    delete: (path: string) => auth(agent.delete(path)),
    async initiate(path: string, body: object = { permissions: "0644" }) {
      const res = await auth(agent.post(`/filesystem-multipart/initiate/${encodeURIComponent(path)}`)).send(body);
      if (res.status !== 200) throw new Error(`initiate ${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.uploadId as string;
    },
    part(uploadId: string, partNumber: number | string, data: Buffer) {
      return auth(agent.put(`/filesystem-multipart/${uploadId}/part?partNumber=${partNumber}`)).attach("file", data, "blob");
    },
    complete(uploadId: string, parts: { partNumber: number; etag: string }[]) {
      return auth(agent.post(`/filesystem-multipart/${uploadId}/complete`)).send({ parts });
    },
  };
}
