import { accountOperations } from "./accounts/routes.js";
import { serviceAccountOperations } from "./accounts/service-accounts.js";
import type { Operation } from "./http/operation.js";
import { crudOperations } from "./resources/crud.js";
import { RESOURCE_KINDS } from "./resources/kinds/index.js";
import { sandboxOperations } from "./sandboxes/routes.js";
import { scheduleOperations } from "./schedules/routes.js";

/**
 * The operations table: every control-plane route, by SDK operation id.
 * Specific routes come first (literal segments such as /sandboxes/by-external-id
 * must win over /sandboxes/:name), then the table-driven CRUD of every kind.
 */
export function allOperations(): Operation[] {
  return [...accountOperations, ...serviceAccountOperations, ...sandboxOperations, ...scheduleOperations(), ...RESOURCE_KINDS.flatMap(crudOperations)];
}
