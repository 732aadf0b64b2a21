/**
 * Connections that go only where the egress policy (egress.ts) allows: the host is resolved and
 * checked before any socket exists, and the socket's own lookup answers with exactly the checked
 * addresses, so a DNS answer that changes between the check and the connection (rebinding) is
 * never used. Node still tries the addresses in turn (IPv6 and IPv4, autoSelectFamily).
 */
import type { LookupAddress } from 'node:dns';
import { connect, type LookupFunction, type Socket } from 'node:net';
import { buildConnector } from 'undici';
import type { EgressPolicy } from './egress';
import { asError } from '../lib/errors';

/** A socket lookup that resolves nothing: it answers with addresses already checked. */
function checkedLookup(addresses: LookupAddress[]): LookupFunction {
  return (hostname, options, callback) => {
    const family =
      options.family === 4 || options.family === 'IPv4' ? 4 : options.family === 6 || options.family === 'IPv6' ? 6 : 0;
    const fit = family === 0 ? addresses : addresses.filter((a) => a.family === family);
    const [first] = fit;
    if (first === undefined) {
      callback(Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: 'ENOTFOUND' }), '', 0);
    } else if (options.all) {
      callback(null, fit);
    } else {
      callback(null, first.address, first.family);
    }
  };
}

/**
 * undici's connector behind the policy. A connector is built per connection because its lookup
 * carries that connection's checked addresses; the only thing lost is TLS session reuse across
 * connections, which a lookup a few times a minute does not need.
 */
export function egressConnector(policy: EgressPolicy, timeoutMs: number): buildConnector.connector {
  return (options, callback) => {
    policy.addresses(options.hostname).then(
      (addresses) => {
        try {
          buildConnector({ timeout: timeoutMs, lookup: checkedLookup(addresses) })(options, callback);
        } catch (err) {
          callback(asError(err), null);
        }
      },
      (err: Error) => callback(err, null),
    );
  };
}

/** A TCP socket to host:port behind the policy (for ssh2, which takes a socket opened for it). */
export async function egressSocket(policy: EgressPolicy, host: string, port: number): Promise<Socket> {
  const addresses = await policy.addresses(host);
  return connect({ host, port, lookup: checkedLookup(addresses) });
}
