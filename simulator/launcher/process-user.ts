import type { ProcessUser } from "./types.js";

/**
 * The sandbox kit's process wrapper (setpriv, ending with its `--`) made to
 * also switch to a user: setpriv sets the groups and ids after it has set the
 * bounding set (which takes a capability the user will not have), and a
 * change to a non-root uid clears the others, so a command runs as that user
 * with no capability. Root with no other group is the wrapper as it is.
 */
export function wrapperAs(wrapper: readonly string[], user: ProcessUser | undefined): string[] {
  if (!user || (user.uid === 0 && user.gid === 0 && user.groups.length === 0)) return [...wrapper];
  const end = wrapper.lastIndexOf("--");
  if (end < 0) throw new Error("the process wrapper does not end its options with --");
  const ids = [`--regid=${user.gid}`, `--reuid=${user.uid}`, user.groups.length > 0 ? `--groups=${user.groups.join(",")}` : "--clear-groups"];
  return [...wrapper.slice(0, end), ...ids, ...wrapper.slice(end)];
}
