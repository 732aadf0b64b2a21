/**
 * Which hosts the hooks may connect to on behalf of a Stack (its git repository, the GitHub API of
 * its App credentials): EGRESS_DENY and EGRESS_ALLOW, and the addresses always denied. A Stack's
 * author names the host, so a check by name alone would let a name that resolves to the cloud
 * metadata service through: every address a name resolves to is checked, and the connection is
 * made to those checked addresses only (egress-connect.ts), never to a second resolution.
 */
import { lookup } from 'node:dns/promises';
import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** One entry of a list: a block of addresses, or a host name (exact, or `*.` for its subdomains). */
type EgressRule =
  | { kind: 'cidr'; text: string; range: [Address, number]; from: string }
  | { kind: 'host'; text: string; name: string; subdomains: boolean; from: string };

/** The operator's lists, parsed (EGRESS_ALLOW, EGRESS_DENY). */
export interface EgressRules {
  allow: EgressRule[];
  deny: EgressRule[];
}

/**
 * Denied whatever the lists say: no git host or GitHub API lives there, and from a pod they reach
 * the node's cloud metadata service (credentials of the node's cloud identity) or host agent.
 */
const ALWAYS_DENIED: [string, string][] = [
  // AWS, GCP, Azure, OCI, OpenStack, DigitalOcean… (169.254.169.254), AWS ECS task credentials (169.254.170.2).
  ['169.254.0.0/16', 'IPv4 link-local'],
  ['fe80::/10', 'IPv6 link-local'],
  ['fd00:ec2::254/128', 'the AWS instance metadata service over IPv6'],
  ['100.100.100.200/32', 'the Alibaba Cloud metadata service'],
  ['168.63.129.16/32', 'the Azure host agent (WireServer)'],
  ['192.0.0.192/32', 'the Oracle Cloud metadata service (classic)'],
];

/** A parsed address with IPv4-mapped IPv6 (::ffff:a.b.c.d) turned into the IPv4 address it is. */
function normalize(address: Address): Address {
  return address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress() ? address.toIPv4Address() : address;
}

/** A block given as IPv4-mapped IPv6 (::ffff:10.0.0.0/104) is that IPv4 block, as the addresses are. */
function normalizeRange([address, bits]: [Address, number]): [Address, number] {
  if (address instanceof ipaddr.IPv6 && bits >= 96 && address.isIPv4MappedAddress())
    return [address.toIPv4Address(), bits - 96];
  return [address, bits];
}

const HOST_PATTERN = /^(\*\.)?([a-z0-9_]([a-z0-9_-]*[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?$/;

function hostName(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

/** The entry as a CIDR when it is meant as an address (a slash, a colon, or only digits and dots). */
function asCidr(entry: string): string | undefined {
  if (entry.includes('/')) return entry;
  if (entry.includes(':')) return `${entry}/128`;
  if (/^[0-9.]+$/.test(entry)) return `${entry}/32`;
  return undefined;
}

/**
 * One entry: a CIDR (10.0.0.0/8, fd00::/8), an address (10.1.2.3, ::1) or a host pattern
 * (git.example.com, *.example.com). IPv4 only in dotted decimal: `010.0.0.0/8` is refused rather
 * than read as octal.
 */
function parseRule(variable: string, entry: string): EgressRule {
  const cidr = asCidr(entry);
  if (cidr !== undefined) {
    const valid = cidr.includes(':') ? ipaddr.IPv6.isValidCIDR(cidr) : ipaddr.IPv4.isValidCIDRFourPartDecimal(cidr);
    if (!valid)
      throw new Error(
        `${variable}: "${entry}" is not a valid ${entry.includes('/') ? 'CIDR (address/prefix length, such as 10.0.0.0/8 or fd00::/8)' : 'IP address'}`,
      );
    return { kind: 'cidr', text: entry, range: normalizeRange(ipaddr.parseCIDR(cidr)), from: variable };
  }
  const name = hostName(entry);
  if (!HOST_PATTERN.test(name))
    throw new Error(
      `${variable}: "${entry}" is neither a CIDR, an IP address nor a host name pattern (git.example.com, *.example.com)`,
    );
  const subdomains = name.startsWith('*.');
  return { kind: 'host', text: entry, name: subdomains ? name.slice(1) : name, subdomains, from: variable };
}

function parseList(variable: string, text: string | undefined): EgressRule[] {
  return (text ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')
    .map((e) => parseRule(variable, e));
}

/** The lists from the environment; an entry that is not a CIDR, address or host pattern throws, naming it. */
export function egressRulesFromEnv(env: NodeJS.ProcessEnv): EgressRules {
  return { allow: parseList('EGRESS_ALLOW', env.EGRESS_ALLOW), deny: parseList('EGRESS_DENY', env.EGRESS_DENY) };
}

const DEFAULT_DENY: EgressRule[] = ALWAYS_DENIED.map(([cidr, what]) => ({
  kind: 'cidr',
  text: cidr,
  range: ipaddr.parseCIDR(cidr),
  from: `${what}, denied by default`,
}));

/** The rules in force, for the start log: the defaults first. */
export function describeEgress(rules: EgressRules | undefined): { allow: string[]; deny: string[] } {
  return {
    allow: (rules?.allow ?? []).map((r) => r.text),
    deny: [...DEFAULT_DENY, ...(rules?.deny ?? [])].map((r) => r.text),
  };
}

function covers(rule: EgressRule, name: string | undefined, address: Address | undefined): boolean {
  if (rule.kind === 'host') {
    if (name === undefined) return false;
    return rule.subdomains ? name.endsWith(rule.name) : name === rule.name;
  }
  return address !== undefined && address.kind() === rule.range[0].kind() && address.match(rule.range);
}

function origin(rule: EgressRule): string {
  return rule.from.startsWith('EGRESS_') ? `of ${rule.from}` : `(${rule.from})`;
}

/** A connection the rules refuse; the message names the host and the rule, never a URL or credential. */
export class EgressDenied extends Error {
  readonly code = 'EGRESS_DENIED';
}

/** The EgressDenied behind an error (undici hands the connector's error on as is; a wrapper may keep it as cause). */
export function egressDenied(err: unknown): EgressDenied | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++)
    if (e instanceof EgressDenied) return e;
  return undefined;
}

/** Every address of a host name, as the system resolves it for a connection (getaddrinfo, /etc/hosts). */
export type HostResolver = (host: string) => Promise<LookupAddress[]>;

const systemResolver: HostResolver = (host) => lookup(host, { all: true, order: 'verbatim' });

/**
 * The egress check. `addresses(host)` resolves the host once and returns its addresses if every one
 * may be connected to, else throws EgressDenied:
 * - a name that an EGRESS_DENY host pattern matches is refused before it is resolved;
 * - an address in a default block or an EGRESS_DENY block refuses the host, whatever allows it
 *   (deny wins);
 * - with EGRESS_ALLOW set, the name must match one of its host patterns, or each address one of its
 *   blocks (allow, when set, means only those).
 */
export class EgressPolicy {
  constructor(
    private readonly rules: EgressRules = { allow: [], deny: [] },
    private readonly resolve: HostResolver = systemResolver,
  ) {}

  async addresses(rawHost: string): Promise<LookupAddress[]> {
    const host = rawHost.startsWith('[') && rawHost.endsWith(']') ? rawHost.slice(1, -1) : rawHost;
    const literal = isIP(host) !== 0;
    const name = literal ? undefined : hostName(host);
    const deniedName = this.rules.deny.find((r) => covers(r, name, undefined));
    if (deniedName)
      throw new EgressDenied(`egress to ${host} is denied: the name matches "${deniedName.text}" of EGRESS_DENY`);
    const found = literal ? [{ address: host, family: isIP(host) }] : await this.resolve(host);
    if (found.length === 0) throw Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' });
    const subject = (address: string) => (literal ? `${address} is` : `it resolves to ${address}, which is`);
    const parsed = found.map((a) => ({ shown: a.address, address: normalize(ipaddr.parse(a.address)) }));
    for (const { shown, address } of parsed) {
      const rule = [...DEFAULT_DENY, ...this.rules.deny].find((r) => covers(r, undefined, address));
      if (rule)
        throw new EgressDenied(`egress to ${host} is denied: ${subject(shown)} in ${rule.text} ${origin(rule)}`);
    }
    if (this.rules.allow.length > 0 && !this.rules.allow.some((r) => covers(r, name, undefined))) {
      const outside = parsed.find(({ address }) => !this.rules.allow.some((r) => covers(r, undefined, address)));
      if (outside)
        throw new EgressDenied(`egress to ${host} is denied: ${subject(outside.shown)} in no entry of EGRESS_ALLOW`);
    }
    return found;
  }
}
