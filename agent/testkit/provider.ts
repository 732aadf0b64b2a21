/**
 * A real resource provider plugin for the agent's tests and bench/agent-up.ts, `pulumi-resource-agenttest`, written with
 * @pulumi/pulumi's provider SDK (gRPC ResourceProvider server; schema for pulumi-language-yaml), for
 * what a test needs to control: how long create and delete take (SIGTERM mid-update) and failures.
 *
 *   agenttest:index:Sleep  { seconds, deleteSeconds?, message? } → outputs { message, result }
 *                          create sleeps `seconds`, delete sleeps `deleteSeconds`
 *   agenttest:index:Fail   { message } → create fails with `message`
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
// From agent/testkit (sources) or dist/agent/testkit (built): the repository root holds node_modules.
const REPO =
  [path.resolve(__dirname, '..', '..'), path.resolve(__dirname, '..', '..', '..')].find((d) =>
    fs.existsSync(path.join(d, 'node_modules', '@pulumi', 'pulumi')),
  ) ?? path.resolve(__dirname, '..', '..');

const SCHEMA = {
  name: 'agenttest',
  version: '1.0.0',
  resources: {
    'agenttest:index:Sleep': {
      inputProperties: { seconds: { type: 'number' }, deleteSeconds: { type: 'number' }, message: { type: 'string' } },
      requiredInputs: ['seconds'],
      properties: {
        seconds: { type: 'number' },
        deleteSeconds: { type: 'number' },
        message: { type: 'string' },
        result: { type: 'string' },
      },
      required: ['seconds', 'result'],
    },
    'agenttest:index:Fail': {
      inputProperties: { message: { type: 'string' } },
      properties: { message: { type: 'string' } },
    },
  },
};

const SOURCE = `#!/usr/bin/env node
// pulumi-resource-agenttest (pko agent tests): see agent/testkit/provider.ts.
const provider = require(${JSON.stringify(path.join(REPO, 'node_modules', '@pulumi', 'pulumi', 'provider'))});
const sleep = (s) => new Promise((r) => setTimeout(r, Math.round(Number(s || 0) * 1000)));
let counter = 0;
provider.main(
  {
    version: '1.0.0',
    schema: ${JSON.stringify(JSON.stringify(SCHEMA))},
    async check(urn, olds, news) { return { inputs: news }; },
    async diff(id, urn, olds, news) {
      const changed = ['seconds', 'deleteSeconds', 'message'].filter((k) => JSON.stringify(olds[k]) !== JSON.stringify(news[k]));
      return { changes: changed.length > 0, replaces: changed.filter((k) => k !== 'deleteSeconds') };
    },
    async create(urn, inputs) {
      if (urn.includes('agenttest:index:Fail')) throw new Error(inputs.message || 'failed on purpose');
      await sleep(inputs.seconds);
      const message = inputs.message === undefined ? 'done' : inputs.message;
      return { id: 'r' + Date.now() + '-' + ++counter, outs: { ...inputs, message, result: 'slept ' + inputs.seconds + 's: ' + message } };
    },
    async update(id, urn, olds, news) { return { outs: { ...olds, ...news } }; },
    async delete(id, urn, props) { await sleep(props.deleteSeconds); },
  },
  process.argv.slice(2),
);
`;

/** Writes the plugin into `<dir>/pulumi-resource-agenttest` and returns `dir` (to put on PATH). */
export function installTestProvider(dir: string): string {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'pulumi-resource-agenttest');
  fs.writeFileSync(file, SOURCE, { mode: 0o755 });
  return dir;
}
