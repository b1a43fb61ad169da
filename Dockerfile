# sandbox-agent as a container image (docs/container.md).
#
#   docker build -t sandbox-agent .
#   docker run -d -p 127.0.0.1:8080:8080 --mount type=secret... (see docs/container.md)
#
# BASE is any glibc image with Node.js >= 20 and npm; the official node:20-bookworm-slim by default.
# Machines without a registry pass a local one: docker build --build-arg BASE=my/node20 .
ARG BASE=node:20-bookworm-slim

# Build: dev dependencies, the TypeScript compile, and better-sqlite3's native module (compiled here when
# no prebuilt binary can be fetched: python3, make and g++ are installed if the base lacks them).
FROM ${BASE} AS build
RUN command -v g++ >/dev/null && command -v make >/dev/null && command -v python3 >/dev/null \
    || (apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*)
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund && npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json index.ts ./
COPY src ./src
COPY sandbox-agent ./sandbox-agent
COPY simulator ./simulator
COPY console ./console
RUN npx tsc -p tsconfig.build.json --declaration false && npm prune --omit=dev --no-audit --no-fund \
    && rm -rf dist/bench dist/examples

# Run: production dependencies (with the compiled native module) and dist/ only.
FROM ${BASE}
RUN (getent group sandbox || groupadd --system --gid 10001 sandbox) \
    && (id -u sandbox 2>/dev/null || useradd --system --uid 10001 --gid sandbox --home-dir /home/sandbox --create-home sandbox) \
    && mkdir -p /sandbox /var/lib/sandbox-agent && chown sandbox:sandbox /sandbox /var/lib/sandbox-agent
WORKDIR /opt/sandbox-agent
COPY --from=build /build/package.json ./
COPY --from=build /build/node_modules ./node_modules
COPY --from=build /build/dist ./dist
# The token comes from a file (a Docker/Kubernetes secret), never from the environment sandbox
# processes inherit: mount it at /run/secrets/sandbox-agent-token.
ENV SANDBOX_AGENT_HOST=0.0.0.0 \
    PORT=8080 \
    SANDBOX_AGENT_ROOT=/ \
    SANDBOX_AGENT_DATA_DIR=/var/lib/sandbox-agent \
    SANDBOX_AGENT_TOKEN_FILE=/run/secrets/sandbox-agent-token \
    LOG_FORMAT=json
# A non-root user by default; bind-mounted drives need root and CAP_SYS_ADMIN (--user 0 --cap-add SYS_ADMIN).
USER sandbox
VOLUME ["/var/lib/sandbox-agent"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "/opt/sandbox-agent/dist/sandbox-agent/main.js"]
