import { z } from "zod";

/**
 * The agent's zod parses without generated code. Zod compiles a parser for each object schema with `new Function`
 * the first time it parses, and V8's code cache cannot hold code made at run time: every agent start paid for
 * compiling the parsers of its configuration and of a first command's body (~4 ms of CPU, on the way to the
 * sandbox's first answer), a cost the generated parsers never win back over a sandbox's few requests of small
 * bodies. Zod reads the setting when a schema is built, so this module is imported before any other of the
 * agent's (sandbox-agent/main.ts, simulator/launcher/warm-agent.ts).
 */
z.config({ jitless: true });
