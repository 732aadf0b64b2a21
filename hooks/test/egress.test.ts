import { generateKeyPairSync } from 'node:crypto';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { startGitServer, type GitServer } from '../../e2e/testbed/git-server';
import { configFromEnv } from '../src/config';
import { describeEgress, EgressDenied, egressRulesFromEnv, EgressPolicy, type HostResolver } from '../src/git/egress';
import { GitResolver } from '../src/git/ls-remote';
import { buildServer } from '../src/server';
import { postJson, stackSyncAnswer, listenOnLoopback } from './answers';
import { condition, makeStack, syncRequest, testConfig } from './builders';
import { startFakeSshGitServer, type FakeSshGitServer } from './ssh-git-server';

/** A resolver from a table (as /etc/hosts would be), recording the names it was asked for. */
function hostsTable(table: Record<string, string[]>): { resolve: HostResolver; asked: string[] } {
  const asked: string[] = [];
  const resolve: HostResolver = (host) => {
    asked.push(host);
    const addresses = table[host];
    if (!addresses)
      return Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }));
    return Promise.resolve(addresses.map((address) => ({ address, family: net.isIP(address) })));
  };
  return { resolve, asked };
}

const policy = (env: NodeJS.ProcessEnv, table: Record<string, string[]> = {}) =>
  new EgressPolicy(egressRulesFromEnv(env), hostsTable(table).resolve);

/**
 * A TCP relay on loopback in front of a server, counting the connections it accepts: what "no
 * connection" means here is no TCP connection at all, not merely no HTTP request.
 */
interface CountingRelay {
  port: number;
  accepted(): number;
  close(): Promise<void>;
}

async function countingRelay(targetPort: number): Promise<CountingRelay> {
  let accepted = 0;
  const open = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    accepted++;
    // A Socket of its own rather than net.connect, which the tests below watch.
    const upstream = new net.Socket().connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    port: (relay.address() as AddressInfo).port,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        relay.close(() => resolve());
      }),
  };
}

/** Watches every socket the process opens through net.connect and tls.connect (undici's and ours). */
function watchConnects() {
  const netConnect = jest.spyOn(net, 'connect');
  const tlsConnect = jest.spyOn(tls, 'connect');
  return {
    hosts: () =>
      [...netConnect.mock.calls, ...tlsConnect.mock.calls].map((args) => (args[0] as { host?: string }).host),
    restore: () => {
      netConnect.mockRestore();
      tlsConnect.mockRestore();
    },
  };
}

const METADATA = 'which is in 169.254.0.0/16 (IPv4 link-local, denied by default)';

/** A branch resolver with short timeouts and the given options, closed once `use` is done. */
async function withResolver(
  options: Partial<ConstructorParameters<typeof GitResolver>[0]>,
  use: (resolver: GitResolver) => Promise<void>,
): Promise<void> {
  const resolver = new GitResolver({ timeoutMs: 2000, cacheTtlMs: 1, ...options });
  try {
    await use(resolver);
  } finally {
    await resolver.close();
  }
}

describe('egress lists (EGRESS_ALLOW, EGRESS_DENY)', () => {
  it('read CIDRs, addresses and host patterns, after the blocks always denied', () => {
    const rules = egressRulesFromEnv({
      EGRESS_ALLOW: '10.0.0.0/8',
      EGRESS_DENY: ' 10.9.0.0/16, fd00::/8 ,10.1.2.3,::1, git.example.com, *.corp.example., ',
    });
    expect(describeEgress(rules)).toEqual({
      allow: ['10.0.0.0/8'],
      deny: [
        '169.254.0.0/16',
        'fe80::/10',
        'fd00:ec2::254/128',
        '100.100.100.200/32',
        '168.63.129.16/32',
        '192.0.0.192/32',
        '10.9.0.0/16',
        'fd00::/8',
        '10.1.2.3',
        '::1',
        'git.example.com',
        '*.corp.example.',
      ],
    });
    expect(describeEgress(configFromEnv({}).egress).allow).toEqual([]);
  });

  it('refuse anything else, naming the variable and the entry, so the hooks do not start', () => {
    const cases: [NodeJS.ProcessEnv, string][] = [
      [{ EGRESS_DENY: '10.0.0.0/33' }, 'EGRESS_DENY: "10.0.0.0/33" is not a valid CIDR'],
      [{ EGRESS_DENY: '10.0.0.0/8,010.0.0.0/8' }, 'EGRESS_DENY: "010.0.0.0/8" is not a valid CIDR'],
      [{ EGRESS_DENY: 'fd00::/129' }, 'EGRESS_DENY: "fd00::/129" is not a valid CIDR'],
      [{ EGRESS_ALLOW: '300.1.1.1' }, 'EGRESS_ALLOW: "300.1.1.1" is not a valid IP address'],
      [{ EGRESS_ALLOW: 'fd00::g' }, 'EGRESS_ALLOW: "fd00::g" is not a valid IP address'],
      [{ EGRESS_ALLOW: 'https://git.example.com' }, 'EGRESS_ALLOW: "https://git.example.com" is not a valid CIDR'],
      [{ EGRESS_ALLOW: 'git example' }, 'EGRESS_ALLOW: "git example" is neither a CIDR, an IP address nor a host'],
      [{ EGRESS_DENY: '*' }, 'EGRESS_DENY: "*" is neither a CIDR, an IP address nor a host name pattern'],
    ];
    for (const [env, message] of cases) {
      expect(() => egressRulesFromEnv(env)).toThrow(message);
      expect(() => configFromEnv(env)).toThrow(message);
    }
  });
});

describe('the egress check, after name resolution', () => {
  it('denies the metadata services and link-local addresses by default, in IPv4-mapped IPv6 too', async () => {
    const defaults = policy(
      {},
      {
        'metadata.test': ['169.254.169.254'],
        'mapped.test': ['::ffff:169.254.169.254'],
        'ecs.test': ['169.254.170.2'],
        'git.test': ['10.0.0.1', 'fd00::1'],
      },
    );
    await expect(defaults.addresses('metadata.test')).rejects.toThrow(
      new EgressDenied(`egress to metadata.test is denied: it resolves to 169.254.169.254, ${METADATA}`),
    );
    await expect(defaults.addresses('mapped.test')).rejects.toThrow(
      `egress to mapped.test is denied: it resolves to ::ffff:169.254.169.254, ${METADATA}`,
    );
    await expect(defaults.addresses('[::ffff:a9fe:a9fe]')).rejects.toThrow(
      `egress to ::ffff:a9fe:a9fe is denied: ::ffff:a9fe:a9fe is in 169.254.0.0/16 (IPv4 link-local, denied by default)`,
    );
    await expect(defaults.addresses('fd00:ec2::254')).rejects.toThrow(
      'fd00:ec2::254 is in fd00:ec2::254/128 (the AWS instance metadata service over IPv6, denied by default)',
    );
    for (const host of ['ecs.test', '169.254.169.254', 'fe80::1', '100.100.100.200', '168.63.129.16', '192.0.0.192'])
      await expect(defaults.addresses(host)).rejects.toBeInstanceOf(EgressDenied);
    // Nothing else is denied without a list: private addresses and loopback are where git servers live.
    await expect(defaults.addresses('git.test')).resolves.toEqual([
      { address: '10.0.0.1', family: 4 },
      { address: 'fd00::1', family: 6 },
    ]);
    await expect(defaults.addresses('127.0.0.1')).resolves.toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('lets deny win over allow, and with an allow list allows only what it lists, by block or by name', async () => {
    const check = policy(
      { EGRESS_ALLOW: '10.0.0.0/8, 169.254.0.0/16, git.example.com', EGRESS_DENY: '10.9.0.0/16' },
      {
        'git.example.com': ['192.168.1.1'],
        'GIT.example.com.': ['192.168.1.1'],
        'inside.test': ['10.1.1.1'],
        'straddling.test': ['10.1.1.1', '192.168.1.1'],
        'half-denied.test': ['10.1.1.1', '10.9.0.1'],
        'meta.git.example.com': ['169.254.169.254'],
      },
    );
    await expect(check.addresses('10.1.1.1')).resolves.toHaveLength(1);
    await expect(check.addresses('inside.test')).resolves.toHaveLength(1);
    await expect(check.addresses('git.example.com')).resolves.toEqual([{ address: '192.168.1.1', family: 4 }]);
    await expect(check.addresses('GIT.example.com.')).resolves.toHaveLength(1);
    await expect(check.addresses('10.9.3.4')).rejects.toThrow(
      'egress to 10.9.3.4 is denied: 10.9.3.4 is in 10.9.0.0/16 of EGRESS_DENY',
    );
    await expect(check.addresses('169.254.169.254')).rejects.toThrow('(IPv4 link-local, denied by default)');
    await expect(check.addresses('192.168.1.1')).rejects.toThrow(
      'egress to 192.168.1.1 is denied: 192.168.1.1 is in no entry of EGRESS_ALLOW',
    );
    await expect(check.addresses('straddling.test')).rejects.toThrow(
      'egress to straddling.test is denied: it resolves to 192.168.1.1, which is in no entry of EGRESS_ALLOW',
    );
    await expect(check.addresses('half-denied.test')).rejects.toThrow(
      'it resolves to 10.9.0.1, which is in 10.9.0.0/16',
    );
    // An allowed name is not its subdomains; a pattern *.example.com would be.
    await expect(check.addresses('meta.git.example.com')).rejects.toThrow('denied by default');
  });

  it('refuses a denied name before resolving it', async () => {
    const table = hostsTable({ 'git.corp.internal': ['10.0.0.1'], internal: ['10.0.0.2'] });
    const check = new EgressPolicy(egressRulesFromEnv({ EGRESS_DENY: '*.internal' }), table.resolve);
    await expect(check.addresses('Git.Corp.Internal')).rejects.toThrow(
      'egress to Git.Corp.Internal is denied: the name matches "*.internal" of EGRESS_DENY',
    );
    expect(table.asked).toEqual([]);
    await expect(check.addresses('internal')).resolves.toHaveLength(1);
  });

  it('compares IPv4-mapped IPv6 and IPv4 alike, in lists and in answers', async () => {
    const mappedRule = policy({ EGRESS_DENY: '::ffff:127.0.0.0/104' });
    await expect(mappedRule.addresses('127.0.0.1')).rejects.toThrow('127.0.0.1 is in ::ffff:127.0.0.0/104');
    const plainRule = policy({ EGRESS_DENY: '127.0.0.0/8' });
    await expect(plainRule.addresses('::ffff:127.0.0.1')).rejects.toThrow('::ffff:127.0.0.1 is in 127.0.0.0/8');
    await expect(plainRule.addresses('::1')).resolves.toHaveLength(1);
  });
});

describe('branch lookups over smart HTTP behind the egress check', () => {
  let server: GitServer;
  let relay: CountingRelay;
  let head: string;
  let byAddress: string;
  let byName: string;
  let watch: ReturnType<typeof watchConnects> | undefined;

  beforeAll(async () => {
    server = await startGitServer();
    server.createRepo('org/app');
    head = server.commit('org/app', 'main', { 'Pulumi.yaml': 'name: app\nruntime: yaml\n' });
    relay = await countingRelay(Number(new URL(server.baseUrl).port));
    byAddress = `http://127.0.0.1:${relay.port}/org/app.git`;
    byName = `http://git.test:${relay.port}/org/app.git`;
  });
  afterEach(() => {
    watch?.restore();
    watch = undefined;
  });
  afterAll(async () => {
    await relay.close();
    await server.close();
  });

  it('never connects to a denied address, by address or by a name resolving to it', async () => {
    const before = server.requests();
    await withResolver(
      { egress: policy({ EGRESS_DENY: '127.0.0.0/8' }, { 'git.test': ['127.0.0.1'] }) },
      async (resolver) => {
        await expect(resolver.resolve({ url: byAddress, ref: 'main' })).resolves.toEqual({
          error: `cannot resolve "main" in ${byAddress}: egress to 127.0.0.1 is denied: 127.0.0.1 is in 127.0.0.0/8 of EGRESS_DENY`,
        });
        await expect(
          resolver.resolve({ url: byName.replace('http://', 'http://deploy:s3cret@'), ref: 'main' }),
        ).resolves.toEqual({
          error: `cannot resolve "main" in ${byName}: egress to git.test is denied: it resolves to 127.0.0.1, which is in 127.0.0.0/8 of EGRESS_DENY`,
        });
      },
    );
    expect(relay.accepted()).toBe(0);
    expect(server.requests()).toBe(before);
  });

  it('connects to an allowed host at the address it checked, resolving it once', async () => {
    // The name is answered once, then "rebinds" to the metadata service: the connection must use
    // the first, checked answer (git.test is in no real DNS, so a second resolution would fail).
    const asked: string[] = [];
    const rebinding: HostResolver = (host) => {
      asked.push(host);
      return Promise.resolve([{ address: asked.length === 1 ? '127.0.0.1' : '169.254.169.254', family: 4 }]);
    };
    const before = relay.accepted();
    await withResolver(
      { egress: new EgressPolicy(egressRulesFromEnv({ EGRESS_ALLOW: '127.0.0.1' }), rebinding) },
      async (resolver) => {
        await expect(resolver.resolve({ url: byName, ref: 'main' })).resolves.toEqual({ sha: head });
        await expect(resolver.resolve({ url: byAddress, ref: 'main' })).resolves.toEqual({ sha: head });
      },
    );
    expect(asked).toEqual(['git.test']);
    expect(relay.accepted() - before).toBe(2);
  });

  it("resolves names with the system's resolver (localhost from /etc/hosts), trying each checked address", async () => {
    const url = `http://localhost:${relay.port}/org/app.git`;
    const before = relay.accepted();
    await withResolver(
      { egress: new EgressPolicy(egressRulesFromEnv({ EGRESS_DENY: '127.0.0.0/8,::1' })) },
      async (denying) => {
        expect(await denying.resolve({ url, ref: 'main' })).toEqual({
          error: expect.stringMatching(
            /: egress to localhost is denied: it resolves to (127\.0\.0\.1, which is in 127\.0\.0\.0\/8|::1, which is in ::1) of EGRESS_DENY$/,
          ),
        });
      },
    );
    expect(relay.accepted()).toBe(before);
    await withResolver({ egress: new EgressPolicy() }, async (allowing) => {
      await expect(allowing.resolve({ url, ref: 'main' })).resolves.toEqual({ sha: head });
    });
    expect(relay.accepted()).toBe(before + 1);
  });

  it('tries the checked addresses in turn when the first refuses', async () => {
    // The relay listens on 127.0.0.1 only: ::1 refuses (or is absent), and 127.0.0.1 is tried next.
    const before = relay.accepted();
    await withResolver({ egress: policy({}, { 'dual.test': ['::1', '127.0.0.1'] }) }, async (resolver) => {
      await expect(
        resolver.resolve({ url: `http://dual.test:${relay.port}/org/app.git`, ref: 'main' }),
      ).resolves.toEqual({ sha: head });
    });
    expect(relay.accepted()).toBe(before + 1);
  });

  it('refuses the metadata service by default without opening a socket, whatever the URL spelling', async () => {
    watch = watchConnects();
    await withResolver(
      { egress: new EgressPolicy(undefined, hostsTable({ 'metadata.test': ['169.254.169.254'] }).resolve) },
      async (resolver) => {
        expect(
          await resolver.resolve({ url: 'http://user:s3cret@metadata.test/latest/meta-data', ref: 'main' }),
        ).toEqual({
          error: `cannot resolve "main" in http://metadata.test/latest/meta-data: egress to metadata.test is denied: it resolves to 169.254.169.254, ${METADATA}`,
        });
        // The URL parser writes these as 169.254.169.254 and ::ffff:a9fe:a9fe.
        for (const url of [
          'http://2852039166/r.git',
          'https://[::ffff:169.254.169.254]/r.git',
          'http://169.254.169.254./r',
        ])
          expect(await resolver.resolve({ url, ref: 'main' })).toEqual({
            error: expect.stringMatching(
              /egress to (169\.254\.169\.254|::ffff:a9fe:a9fe) is denied: .* denied by default\)$/,
            ),
          });
      },
    );
    expect(watch.hosts()).toEqual([]);
  });

  it('does not follow a redirect to a denied host', async () => {
    const redirecting: HttpServer = createHttpServer((_req, res) => {
      res.writeHead(302, { location: 'http://metadata.test/latest/meta-data' });
      res.end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/r.git`;
    const resolver = new GitResolver({
      timeoutMs: 2000,
      cacheTtlMs: 1,
      egress: new EgressPolicy(undefined, hostsTable({ 'metadata.test': ['169.254.169.254'] }).resolve),
    });
    watch = watchConnects();
    try {
      expect(await resolver.resolve({ url, ref: 'main' })).toEqual({
        error: `cannot resolve "main" in ${url}: egress to metadata.test is denied: it resolves to 169.254.169.254, ${METADATA}`,
      });
    } finally {
      await resolver.close();
      redirecting.closeAllConnections();
      await new Promise((resolve) => redirecting.close(resolve));
    }
    expect(watch.hosts()).toEqual(['127.0.0.1']);
  });

  it('checks the GitHub API of App credentials too', async () => {
    const pem = generateKeyPairSync('rsa', { modulusLength: 2048 })
      .privateKey.export({ type: 'pkcs1', format: 'pem' })
      .toString();
    watch = watchConnects();
    await withResolver(
      {
        githubApiUrl: 'http://api.github.test/api/v3',
        egress: new EgressPolicy(undefined, hostsTable({ 'api.github.test': ['169.254.169.254'] }).resolve),
      },
      async (resolver) => {
        const r = await resolver.resolve({
          url: byAddress,
          ref: 'main',
          githubApp: { appId: '1', installationId: '2', privateKey: pem },
        });
        expect(r).toEqual({
          error: `cannot resolve "main" in ${byAddress}: the GitHub API: egress to api.github.test is denied: it resolves to 169.254.169.254, ${METADATA}`,
        });
        expect(JSON.stringify(r)).not.toContain('PRIVATE KEY');
      },
    );
    expect(watch.hosts()).toEqual([]);
  });
});

describe('branch lookups over SSH behind the egress check', () => {
  let server: FakeSshGitServer;
  let relay: CountingRelay;
  let head: string;
  let knownHosts: string;
  const urlOf = (host: string) => `ssh://git@${host}:${relay.port}/app.git`;
  let watch: ReturnType<typeof watchConnects> | undefined;

  beforeAll(async () => {
    server = await startFakeSshGitServer();
    server.createRepo('app');
    head = server.commit('app', 'main', { 'Pulumi.yaml': 'name: app\nruntime: yaml\n' });
    relay = await countingRelay(server.port);
    // The relay's port, under the address and under the name the tests resolve.
    const hostKey = server.knownHosts.ed25519.replace(/^\S+ /, '');
    knownHosts = `[127.0.0.1]:${relay.port},[ssh.test]:${relay.port} ${hostKey}`;
  });
  afterEach(() => {
    watch?.restore();
    watch = undefined;
  });
  afterAll(async () => {
    await relay.close();
    await server.close();
  });

  const sshResolver = (env: NodeJS.ProcessEnv, table: Record<string, string[]>) =>
    new GitResolver({ timeoutMs: 2000, cacheTtlMs: 1, sshKnownHosts: knownHosts, egress: policy(env, table) });

  it('never connects to a denied address, by address or by a name resolving to it', async () => {
    const resolver = sshResolver({ EGRESS_DENY: '127.0.0.0/8' }, { 'ssh.test': ['127.0.0.1'] });
    const ssh = { privateKey: server.clientKey };
    try {
      expect(await resolver.resolve({ url: urlOf('127.0.0.1'), ref: 'main', ssh })).toEqual({
        error: `cannot resolve "main" in ssh://127.0.0.1:${relay.port}/app.git: egress to 127.0.0.1 is denied: 127.0.0.1 is in 127.0.0.0/8 of EGRESS_DENY`,
      });
      expect(await resolver.resolve({ url: urlOf('ssh.test'), ref: 'main', ssh })).toEqual({
        error: `cannot resolve "main" in ssh://ssh.test:${relay.port}/app.git: egress to ssh.test is denied: it resolves to 127.0.0.1, which is in 127.0.0.0/8 of EGRESS_DENY`,
      });
    } finally {
      await resolver.close();
    }
    expect(relay.accepted()).toBe(0);
    expect(server.connections()).toBe(0);
  });

  it('reads an allowed server at the address it checked', async () => {
    const resolver = sshResolver({ EGRESS_ALLOW: '127.0.0.0/8' }, { 'ssh.test': ['127.0.0.1'] });
    const ssh = { privateKey: server.clientKey };
    const before = relay.accepted();
    try {
      await expect(resolver.resolve({ url: urlOf('ssh.test'), ref: 'main', ssh })).resolves.toEqual({ sha: head });
      await expect(resolver.resolve({ url: urlOf('127.0.0.1'), ref: 'main', ssh })).resolves.toEqual({ sha: head });
    } finally {
      await resolver.close();
    }
    expect(relay.accepted() - before).toBe(2);
  });

  it('refuses the metadata service by default without opening a socket', async () => {
    const resolver = sshResolver({}, { 'metadata.test': ['169.254.169.254'] });
    watch = watchConnects();
    try {
      expect(
        await resolver.resolve({
          url: 'git@metadata.test:org/r.git',
          ref: 'main',
          ssh: { privateKey: server.clientKey },
        }),
      ).toEqual({
        error: `cannot resolve "main" in git@metadata.test:org/r.git: egress to metadata.test is denied: it resolves to 169.254.169.254, ${METADATA}`,
      });
    } finally {
      await resolver.close();
    }
    expect(watch.hosts()).toEqual([]);
  });
});

describe('a Stack whose repository the egress lists deny', () => {
  let server: GitServer;
  let relay: CountingRelay;
  beforeEach(async () => {
    server = await startGitServer();
    server.createRepo('org/app');
    server.commit('org/app', 'main', { 'Pulumi.yaml': 'name: app\nruntime: yaml\n' });
    relay = await countingRelay(Number(new URL(server.baseUrl).port));
  });
  afterEach(async () => {
    await relay.close();
    await server.close();
  });

  const sync = async (env: NodeJS.ProcessEnv) => {
    const { app } = buildServer({ ...testConfig, egress: egressRulesFromEnv(env) }, { logger: false });
    const base = await listenOnLoopback(app);
    try {
      const stack = makeStack({
        programRef: undefined,
        projectRepo: `http://127.0.0.1:${relay.port}/org/app.git`,
        branch: 'main',
      });
      const res = await postJson(`${base}/stack/sync`, {
        controller: {},
        ...syncRequest(stack, [], []),
      });
      expect(res.status).toBe(200);
      return stackSyncAnswer(res.json);
    } finally {
      await app.close();
    }
  };

  it('is Stalled SourceUnavailable naming the host and the rule, and the server sees no connection', async () => {
    const denied = await sync({ EGRESS_DENY: '127.0.0.0/8' });
    expect(condition(denied.status, 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'SourceUnavailable',
      message: `cannot resolve "main" in http://127.0.0.1:${relay.port}/org/app.git: egress to 127.0.0.1 is denied: 127.0.0.1 is in 127.0.0.0/8 of EGRESS_DENY`,
    });
    expect(relay.accepted()).toBe(0);
    const notListed = await sync({ EGRESS_ALLOW: '10.0.0.0/8' });
    expect(condition(notListed.status, 'Stalled')?.message).toContain('127.0.0.1 is in no entry of EGRESS_ALLOW');
    expect(relay.accepted()).toBe(0);
  });

  it('goes ahead when the lists allow the host', async () => {
    const allowed = await sync({ EGRESS_ALLOW: '127.0.0.1', EGRESS_DENY: '10.0.0.0/8' });
    expect(condition(allowed.status, 'Stalled')).toBeUndefined();
    expect(allowed.children.some((c) => c.kind === 'Workspace')).toBe(true);
    expect(relay.accepted()).toBe(1);
  });
});
