/** One image build at a time per cache dir: a lock file holding the builder's pid. */
import * as fs from 'node:fs';
import { sleep } from '../helpers';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock (waiting for a live holder, taking over from a dead one); returns its release. */
export async function acquireLock(file: string, timeoutMs = 60 * 60_000): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = fs.openSync(file, 'wx');
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      return () => fs.rmSync(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number(fs.readFileSync(file, 'utf8').trim() || '0');
    if (!(holder > 0 && alive(holder))) {
      fs.rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`${file}: held by pid ${holder} for too long`);
    await sleep(1000);
  }
}
