import { createHash } from "node:crypto";
import { AGENT_DATA, IN_SANDBOX_API_PORT } from "../launcher/bwrap.js";

/**
 * What `/sandbox-api` is in the image the simulator provides as
 * `ghcr.io/blaxel-ai/sandbox:<any tag>` (template-build.ts), so the
 * platform's template Dockerfiles (`COPY --from=ghcr.io/blaxel-ai/sandbox:latest
 * /sandbox-api /usr/local/bin/sandbox-api`) build offline and run here.
 *
 * A POSIX sh script, not a program: in a sandbox the daemon it stands for is
 * already running (the launcher starts the sandbox's agent before the
 * image's entrypoint, and the agent answers on localhost:8080), so all it has
 * to do is what the entrypoints expect of `sandbox-api &` — stay in the
 * foreground for their final `wait`, for as long as the sandbox runs. An entrypoint
 * script needs /bin/sh anyway; a static binary would add a compiler to the
 * build for no behaviour a script lacks. Outside a sandbox-sim sandbox
 * (`docker run` of the template) there is no agent to hand over to and the
 * image has no Node.js to start one: it says so and exits 1.
 */
export const SANDBOX_API_STAND_IN = `#!/bin/sh
# sandbox-kit's stand-in for Blaxel's sandbox-api (the image the simulator provides as ghcr.io/blaxel-ai/sandbox).
# Inside a sandbox-sim sandbox the sandbox's own agent already serves the sandbox API on localhost:${IN_SANDBOX_API_PORT};
# this stays in the foreground, as the daemon would, for as long as the sandbox runs. Options (-port, ...) are ignored.
# ${AGENT_DATA}/etc is in every sandbox-sim sandbox, whether its agent runs in it or in the simulator's agent host.
marker=${AGENT_DATA}/etc
if [ ! -d "$marker" ]; then
  echo "sandbox-api: this is sandbox-kit's stand-in for Blaxel's sandbox-api; it runs inside a sandbox-sim sandbox, where the sandbox's agent serves localhost:${IN_SANDBOX_API_PORT} (create one from this image with SandboxInstance.create({image}))" >&2
  exit 1
fi
echo "sandbox-api: the sandbox's agent serves the sandbox API on localhost:${IN_SANDBOX_API_PORT} (sandbox-kit)" >&2
while [ -d "$marker" ]; do sleep 5; done
`;

/** Names the stand-in image answers to: ghcr.io/blaxel-ai/sandbox with any tag. */
export const SANDBOX_API_REPOSITORY = "ghcr.io/blaxel-ai/sandbox";

/** Identifies this version of the stand-in (a builder image labelled with another is replaced). */
export const STAND_IN_DIGEST = `sha256:${createHash("sha256").update(SANDBOX_API_STAND_IN).digest("hex")}`;
