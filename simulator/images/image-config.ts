import type { LaunchSpec } from "../launcher/types.js";
import { isRoot, resolveImageUser, type ImageUser } from "./image-user.js";

/**
 * An image's own configuration applied to a launch, as a container runtime
 * applies it: its Env under the sandbox's envs (spec.runtime.envs win), so
 * SHELL, PATH and HOME reach every command (the agent runs commands with
 * `$SHELL -c`, as the reference daemon does); its WorkingDir as the directory
 * commands start in when they name none (the reference daemon's own working
 * directory, the image's WORKDIR on the platform); its User as the identity
 * commands run as, with HOME from its passwd entry unless the image's Env
 * sets one.
 */

export interface ImageConfigInput {
  env: Record<string, string>;
  workingDir: string;
  user: string;
  /** The image's root directories, top first (ResolvedImage.layers). */
  layers: string[];
}

export interface AppliedConfig {
  user?: ImageUser;
  /** Why the image's User is not applied (the sandbox has only one user id), to tell the user. */
  notice?: string;
}

/**
 * Sets spec.env, spec.workingDir and spec.user from the image. `singleUserId`
 * is the launcher's reason why a sandbox has only its root id (Launcher.singleUserId):
 * commands then run as root, and the notice says why. Throws ImageUserError for a
 * User the image's passwd/group files cannot resolve (a container runtime refuses to start it too).
 */
export function applyImageConfig(spec: LaunchSpec, image: ImageConfigInput, singleUserId?: string): AppliedConfig {
  // The sandbox's own writable layer first: a user added in the sandbox (useradd) is found after a restart.
  const user = resolveImageUser(image.user, [spec.rootDir, ...image.layers]);
  const home: Record<string, string> = user && !("HOME" in image.env) ? { HOME: user.home } : {};
  spec.env = { ...home, ...image.env, ...spec.env };
  if (image.workingDir && image.workingDir !== "/") spec.workingDir = image.workingDir;
  if (!user || isRoot(user)) return { user };
  if (singleUserId) {
    return { user, notice: `the image's User "${user.spec}" (uid ${user.uid}, gid ${user.gid}) is not applied: ${singleUserId}, so commands run as root` };
  }
  spec.user = { uid: user.uid, gid: user.gid, groups: user.groups };
  return { user };
}
