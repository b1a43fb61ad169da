/** The kinds stored under a sandbox, deleted with it (by a delete and by expiry, which cannot import the sandbox kind: it calls expiry). */
export const SANDBOX_CHILDREN = ["preview", "preview-token", "schedule", "schedule-execution"];
