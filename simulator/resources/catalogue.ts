import { errors } from "../../src/errors.js";
import type { Operation } from "../http/operation.js";

/**
 * Read-only catalogues the real service serves from its own data: regions,
 * hubs, templates, changelog, public IPs. The simulator answers a small fixed
 * set in the SDK's shapes.
 */
export const REGIONS = [
  { region: "us-pdx-1", location: "Portland", country: "us", continent: "north-america" },
  { region: "us-was-1", location: "Washington", country: "us", continent: "north-america" },
  { region: "eu-lon-1", location: "London", country: "gb", continent: "europe" },
  { region: "eu-dub-1", location: "Dublin", country: "ie", continent: "europe" },
];

const CPU = [{ name: "cpu", type: "cpu" }];

export const catalogueOperations: Operation[] = [
  {
    id: "listLocations",
    method: "get",
    path: "/locations",
    scope: "locations:list",
    handler: () => REGIONS.map((r) => ({ ...r, flavors: CPU, status: "healthy" })),
  },
  {
    id: "getConfiguration",
    method: "get",
    path: "/configuration",
    scope: "configurations:list",
    handler: () => ({
      continents: [
        { name: "north-america", displayName: "North America" },
        { name: "europe", displayName: "Europe" },
      ],
      countries: [
        { name: "us", displayName: "United States" },
        { name: "gb", displayName: "United Kingdom" },
        { name: "ie", displayName: "Ireland" },
      ],
      regions: REGIONS.map((r) => ({ name: r.region, displayName: r.location, country: r.country, continent: r.continent, allowed: true })),
      detectedRegion: "us-pdx-1",
      privateLocations: [],
    }),
  },
  {
    id: "listMcpHubDefinitions",
    method: "get",
    path: "/mcp/hub",
    scope: "mcphub:list",
    handler: () => [
      {
        name: "gmail",
        displayName: "Gmail",
        description: "Send and read email",
        integration: "gmail",
        transport: "http-stream",
        image: "blaxel/gmail:latest",
        categories: [],
        hiddenSecrets: ["CLIENT_SECRET", "REFRESH_TOKEN"],
      },
      {
        name: "github",
        displayName: "GitHub",
        description: "Repositories and issues",
        integration: "github",
        transport: "http-stream",
        image: "blaxel/github:latest",
        categories: [],
      },
    ],
  },
  {
    id: "listSandboxHubDefinitions",
    method: "get",
    path: "/sandbox/hub",
    scope: "sandboxhub:list",
    handler: () => [
      { name: "base-image", displayName: "Base image", image: "blaxel/base-image:latest", memory: 4096, ports: [], description: "Default sandbox image" },
      { name: "node", displayName: "Node.js", image: "blaxel/node:latest", memory: 4096, ports: [{ name: "http", target: 3000, protocol: "HTTP" }] },
    ],
  },
  { id: "listTemplates", method: "get", path: "/templates", scope: "templates:list", handler: () => TEMPLATES },
  {
    id: "getTemplate",
    method: "get",
    path: "/templates/:templateName",
    scope: "templates:get",
    handler: (ctx) => {
      const found = TEMPLATES.find((t) => t.name === ctx.params.templateName);
      if (!found) throw errors.notFound(`template "${ctx.params.templateName}" not found`);
      return found;
    },
  },
  {
    id: "getChangelog",
    method: "get",
    path: "/changelog",
    scope: "workspaces:get",
    level: "account",
    handler: () => ({ entries: [{ title: "sandbox-sim", date: "2026-04-28", content: "API version 2026-04-28: cursor pagination on list operations." }] }),
  },
  {
    id: "listPublicIps",
    method: "get",
    path: "/publicIps",
    scope: "locations:list",
    handler: (ctx) =>
      Object.fromEntries(
        REGIONS.filter((r) => !ctx.query.region || r.region === ctx.query.region).map((r, i) => [
          r.region,
          { description: `egress of ${r.region}`, ipv4Cidrs: [`198.51.100.${i * 16}/28`], ipv6Cidrs: [`2001:db8:${i + 1}::/48`] },
        ]),
      ),
  },
  {
    id: "getIntegration",
    method: "get",
    path: "/integrations/:integrationName",
    scope: "integrations:list",
    handler: (ctx) => ({ name: ctx.params.integrationName, additionalInfos: {}, endpoints: {}, headers: {}, params: {}, organizations: [], repositories: [] }),
  },
];

const TEMPLATES = [
  {
    name: "template-sandbox-ts",
    description: "TypeScript sandbox starter",
    defaultBranch: "main",
    topics: ["sandbox", "typescript"],
    url: "https://example.invalid/templates/template-sandbox-ts",
    variables: [],
    sha: "0000000",
    starCount: 0,
    forksCount: 0,
    downloadCount: 0,
  },
  {
    name: "template-mcp-ts",
    description: "MCP server starter",
    defaultBranch: "main",
    topics: ["mcp"],
    url: "https://example.invalid/templates/template-mcp-ts",
    variables: [],
    sha: "0000000",
    starCount: 0,
    forksCount: 0,
    downloadCount: 0,
  },
];
