/**
 * The egress tunnel's wire protocol, shared by the agent (sandbox-agent/ports/egress-tunnel.ts) and the launcher
 * that opens tunnels to it (simulator/launcher/swarm-egress.ts): `GET EGRESS_TUNNEL_PATH` with the agent's token
 * and `Upgrade: EGRESS_TUNNEL_PROTOCOL`; after the 101, the agent writes TUNNEL_PAIRED once a sandbox's
 * connection takes the tunnel, then relays that connection's bytes both ways.
 */
export const EGRESS_TUNNEL_PATH = "/egress-tunnel";
export const EGRESS_TUNNEL_PROTOCOL = "sandbox-egress";
export const TUNNEL_PAIRED = "+";
