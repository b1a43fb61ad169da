/** The files the hub recipes write into their apps (hub/<name>/ of the platform's sources, adapted). */

export const viteConfig = `import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

// The dev server answers on every address and any Host (previews, /port/5173).
export default defineConfig({
  plugins: [react()],
  server: { port: 5173, host: '::', allowedHosts: true },
})
`;

export const nextConfig = `import type { NextConfig } from "next";

// Previews reach the dev server under other host names.
const nextConfig: NextConfig = { allowedDevOrigins: ["*", "**"] };

export default nextConfig;
`;

export const tsPackage =
  JSON.stringify(
    { name: "app", version: "1.0.0", private: true, type: "module", scripts: { dev: "tsx watch src/index.ts", build: "tsc", start: "node dist/index.js" } },
    null,
    2,
  ) + "\n";
export const tsIndex = `import { createServer } from "node:http";

const port = Number(process.env.PORT ?? 3000);
createServer((_req, res) => {
  res.setHeader("content-type", "text/plain");
  res.end("Hello from the ts-app sandbox\\n");
}).listen(port, "0.0.0.0", () => console.log(\`listening on \${port}\`));
`;
export const tsConfig =
  JSON.stringify(
    {
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        outDir: "dist",
        strict: true,
        esModuleInterop: true,
        skipLibCheck: true,
      },
      include: ["src"],
    },
    null,
    2,
  ) + "\n";
