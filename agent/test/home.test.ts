import { describe, expect, it } from '@jest/globals';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureWritableHome } from '../src/serve/home';

describe('the workspace HOME', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-home-'));

  it("keeps the image's HOME when it is a writable directory (what a user's image pre-installed stays found)", () => {
    const home = path.join(root, 'home', 'pulumi');
    fs.mkdirSync(home, { recursive: true });
    const env: NodeJS.ProcessEnv = { HOME: home, PKO_AGENT_ROOT: root };
    expect(ensureWritableHome(env)).toBe(home);
    expect(env.HOME).toBe(home);
  });

  it('moves to /share/home when HOME is unset, missing or a file', () => {
    const file = path.join(root, 'not-a-dir');
    fs.writeFileSync(file, '');
    for (const home of [undefined, path.join(root, 'missing'), file]) {
      const env: NodeJS.ProcessEnv = { PKO_AGENT_ROOT: root, ...(home ? { HOME: home } : {}) };
      expect(ensureWritableHome(env)).toBe(path.join(root, 'share', 'home'));
      expect(env.HOME).toBe(path.join(root, 'share', 'home'));
      expect(fs.statSync(env.HOME!).isDirectory()).toBe(true);
    }
  });
});
