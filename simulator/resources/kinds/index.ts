import type { ResourceKind } from "../kind.js";
import { previewKind, previewTokenKind, sandboxKind } from "./sandbox.js";

/** Every table-driven resource kind; crud.ts serves each. Add new kinds here. */
export const RESOURCE_KINDS: readonly ResourceKind[] = [sandboxKind, previewKind, previewTokenKind];
