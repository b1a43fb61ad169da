import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";

/**
 * Addresses a sandbox's traffic never reaches through the egress proxy: the
 * host's loopback (the simulator's other services, databases, other
 * sandboxes' agents), "this host" and link-local (cloud metadata), as
 * slirp4netns's --disable-host-loopback keeps them out of the direct path.
 * The simulator's own public surface is routed to it before this check.
 */
const HOST_ONLY = new BlockList();
HOST_ONLY.addSubnet("127.0.0.0", 8, "ipv4");
HOST_ONLY.addSubnet("0.0.0.0", 8, "ipv4");
HOST_ONLY.addSubnet("169.254.0.0", 16, "ipv4");
HOST_ONLY.addAddress("::1", "ipv6");
HOST_ONLY.addAddress("::", "ipv6");
HOST_ONLY.addSubnet("fe80::", 10, "ipv6");
HOST_ONLY.addSubnet("::ffff:127.0.0.0", 104, "ipv6");

export function isHostOnly(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return HOST_ONLY.check(address, family === 4 ? "ipv4" : "ipv6");
}

export class HostOnlyDestination extends Error {
  readonly code = "EGRESS_HOST_ONLY";
  constructor(host: string) {
    super(`${host} is the simulator's host (loopback or link-local): not reachable from a sandbox`);
  }
}

/** dns.lookup that fails for names resolving to a host-only address (checked on what is connected to, so a rebinding name cannot slip through). */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, "", 0);
    const list = addresses as LookupAddress[];
    if (list.length === 0 || list.some((a) => isHostOnly(a.address))) return callback(new HostOnlyDestination(hostname), "", 0);
    if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
    callback(null, list[0]!.address, list[0]!.family);
  });
};
