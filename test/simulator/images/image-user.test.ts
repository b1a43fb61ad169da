import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyImageConfig } from "../../../simulator/images/image-config.js";
import { ImageUserError, resolveImageUser, resolveUser } from "../../../simulator/images/image-user.js";
import { wrapperAs } from "../../../simulator/launcher/process-user.js";
import type { LaunchSpec } from "../../../simulator/launcher/types.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

const PASSWD = "root:x:0:0:root:/root:/bin/bash\n# a comment\nnode:x:1000:1000::/home/node:/bin/sh\nsvc:x:1200:1300::/srv:/usr/sbin/nologin\n";
const GROUP = "root:x:0:\nnode:x:1000:\nsvc:x:1300:\ndocker:x:999:node,svc\nstaff:x:50:node\n";

describe("an image's User, resolved as a container runtime does (runc GetExecUser)", () => {
  it("a name or a uid takes its passwd entry's group, home and the groups listing it", () => {
    expect(resolveUser("node", PASSWD, GROUP)).toEqual({ spec: "node", uid: 1000, gid: 1000, groups: [999, 50], home: "/home/node" });
    expect(resolveUser("1200", PASSWD, GROUP)).toEqual({ spec: "1200", uid: 1200, gid: 1300, groups: [999], home: "/srv" });
    expect(resolveUser("root", PASSWD, GROUP)).toMatchObject({ uid: 0, gid: 0, groups: [], home: "/root" });
  });

  it("a uid with no entry is used as is, group 0 and home /; an explicit group replaces the supplementary ones", () => {
    expect(resolveUser("4242", PASSWD, GROUP)).toEqual({ spec: "4242", uid: 4242, gid: 0, groups: [], home: "/" });
    expect(resolveUser("node:staff", PASSWD, GROUP)).toMatchObject({ uid: 1000, gid: 50, groups: [] });
    expect(resolveUser("4242:4343", "", "")).toMatchObject({ uid: 4242, gid: 4343, groups: [] });
  });

  it("an unknown name, an unknown group or a malformed User is refused with the runtime's wording", () => {
    expect(() => resolveUser("ghost", PASSWD, GROUP)).toThrow(new ImageUserError("unable to find user ghost: no matching entries in passwd file"));
    expect(() => resolveUser("node:nogroup", PASSWD, GROUP)).toThrow("unable to find group nogroup: no matching entries in group file");
    expect(() => resolveUser("a:b:c", PASSWD, GROUP)).toThrow(/invalid User/);
    expect(() => resolveUser(":1000", PASSWD, GROUP)).toThrow(/invalid User/);
  });

  it("reads the sandbox's own layer before the image's, and never follows a symbolic link out of them", () => {
    const image = trackedTempDir("image-user-");
    const upper = trackedTempDir("image-user-upper-");
    mkdirSync(join(image, "etc"));
    writeFileSync(join(image, "etc/passwd"), PASSWD);
    writeFileSync(join(image, "etc/group"), GROUP);
    expect(resolveImageUser("node", [upper, image])?.uid).toBe(1000);
    mkdirSync(join(upper, "etc"));
    writeFileSync(join(upper, "etc/passwd"), "node:x:2000:2000::/n:/bin/sh\n");
    expect(resolveImageUser("node", [upper, image])).toMatchObject({ uid: 2000, gid: 2000 });
    const linked = trackedTempDir("image-user-link-");
    mkdirSync(join(linked, "etc"));
    const host = join(trackedTempDir("image-user-host-"), "passwd");
    writeFileSync(host, "node:x:3000:3000::/h:/bin/sh\n");
    symlinkSync(host, join(linked, "etc/passwd"));
    expect(() => resolveImageUser("node", [linked])).toThrow(/unable to find user node/);
    expect(resolveImageUser("", [image])).toBeUndefined();
  });
});

describe("applying an image's configuration to a launch", () => {
  const spec = (env?: Record<string, string>): LaunchSpec => ({
    workspace: "w",
    sandbox: "s",
    rootDir: trackedTempDir("image-user-root-"),
    dataDir: "/nonexistent",
    token: "t",
    env,
  });
  const rootfs = () => {
    const dir = trackedTempDir("image-user-rootfs-");
    mkdirSync(join(dir, "etc"));
    writeFileSync(join(dir, "etc/passwd"), PASSWD);
    writeFileSync(join(dir, "etc/group"), GROUP);
    return dir;
  };

  it("the sandbox's envs win over the image's Env; HOME comes from the user's entry unless the Env sets one", () => {
    const launch = spec({ A: "sandbox" });
    applyImageConfig(launch, { env: { A: "image", SHELL: "/bin/bash" }, workingDir: "/app", user: "node", layers: [rootfs()] });
    expect(launch).toMatchObject({
      env: { A: "sandbox", SHELL: "/bin/bash", HOME: "/home/node" },
      workingDir: "/app",
      user: { uid: 1000, gid: 1000, groups: [999, 50] },
    });
    const withHome = spec();
    applyImageConfig(withHome, { env: { HOME: "/data" }, workingDir: "/", user: "node", layers: [rootfs()] });
    expect(withHome.env).toEqual({ HOME: "/data" });
    expect(withHome.workingDir).toBeUndefined();
  });

  it("where the sandbox has one id only, commands stay root and the notice says why", () => {
    const launch = spec();
    const applied = applyImageConfig(launch, { env: {}, workingDir: "/", user: "node", layers: [rootfs()] }, "only root is mapped");
    expect(launch.user).toBeUndefined();
    expect(applied.notice).toBe(`the image's User "node" (uid 1000, gid 1000) is not applied: only root is mapped, so commands run as root`);
    expect(applyImageConfig(spec(), { env: {}, workingDir: "/", user: "root", layers: [rootfs()] }, "only root is mapped").notice).toBeUndefined();
  });
});

describe("the process wrapper switching to the image's user", () => {
  const kit = [
    "/opt/sandbox-kit/lib/ld.so",
    "--library-path",
    "/opt/sandbox-kit/lib",
    "/opt/sandbox-kit/bin/setpriv",
    "--inh-caps=-all",
    "--bounding-set=-all",
    "--",
  ];

  it("adds setpriv's ids before its --, groups or none; root is the wrapper unchanged", () => {
    expect(wrapperAs(kit, { uid: 1000, gid: 1001, groups: [27, 100] })).toEqual([...kit.slice(0, -1), "--regid=1001", "--reuid=1000", "--groups=27,100", "--"]);
    expect(wrapperAs(kit, { uid: 1000, gid: 1000, groups: [] })).toEqual([...kit.slice(0, -1), "--regid=1000", "--reuid=1000", "--clear-groups", "--"]);
    expect(wrapperAs(kit, { uid: 0, gid: 0, groups: [] })).toEqual(kit);
    expect(wrapperAs(kit, undefined)).toEqual(kit);
    expect(() => wrapperAs(["setpriv"], { uid: 1, gid: 1, groups: [] })).toThrow(/--/);
  });
});
