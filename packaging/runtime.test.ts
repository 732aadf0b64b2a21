/** The suite runs on the Node.js major that package.json declares (from the `node` devDependency). */
import { describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
  engines: { node: string };
  devDependencies: { node: string };
};

describe('runtime', () => {
  test('tests run on the Node.js major of engines.node and of the node devDependency', () => {
    const running = process.versions.node.split('.')[0];
    expect(/\d+/.exec(pkg.engines.node)?.[0]).toBe(running);
    expect(/\d+/.exec(pkg.devDependencies.node)?.[0]).toBe(running);
  });
});
