import { z } from "zod";
import type { ResourceKind } from "../kind.js";

/** VPCs, their egress gateways and the egress IPs allocated from a gateway. */
export const vpcKind: ResourceKind = {
  kind: "vpc",
  collection: "/vpcs",
  param: "vpcName",
  ops: { list: "listVpcs", create: "createVpc", get: "getVpc", delete: "deleteVpc" },
  spec: z.strictObject({}),
  lifecycle: "deployment",
  list: "bare",
  children: ["egress-gateway", "egress-ip"],
};

export const egressGatewayKind: ResourceKind = {
  kind: "egress-gateway",
  collection: "/vpcs/:vpcName/egressgateways",
  param: "gatewayName",
  parent: { params: ["vpcName"], kind: "vpc", label: "VPC" },
  ops: { list: "listEgressGateways", create: "createEgressGateway", get: "getEgressGateway", delete: "deleteEgressGateway" },
  spec: z.strictObject({ region: z.string({ error: "required" }).min(1) }),
  lifecycle: "deployment",
  list: "bare",
  children: ["egress-ip"],
  prepare(doc, ctx) {
    doc.metadata.vpcName = ctx.params.vpcName;
  },
};

export const egressIpKind: ResourceKind = {
  kind: "egress-ip",
  collection: "/vpcs/:vpcName/egressgateways/:gatewayName/ips",
  param: "ipName",
  parent: { params: ["vpcName", "gatewayName"], kind: "egress-gateway", label: "egress gateway" },
  ops: { list: "listEgressIps", create: "createEgressIp", get: "getEgressIp", delete: "deleteEgressIp" },
  spec: z.strictObject({ ipFamily: z.enum(["IPv4", "IPv6"], { error: "required: IPv4 or IPv6" }), publicIp: z.string().optional() }),
  lifecycle: "deployment",
  list: "bare",
  prepare(doc, ctx, deps) {
    doc.metadata.vpcName = ctx.params.vpcName;
    doc.metadata.gatewayName = ctx.params.gatewayName;
    // Documentation address ranges (RFC 5737 / RFC 3849): never routable.
    const n = deps.resources.count(ctx.workspace, "egress-ip", `${ctx.params.vpcName}/${ctx.params.gatewayName}`) + 1;
    doc.spec.publicIp = doc.spec.ipFamily === "IPv6" ? `2001:db8::${n.toString(16)}` : `203.0.113.${n % 255}`;
  },
};
