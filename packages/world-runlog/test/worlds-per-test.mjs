// One fresh temporary directory per test, and the Worlds a test opens closed after it:
// the setup the World test files share. `worldsPerTest(open)` registers the vitest hooks
// and returns `{ dir, world }`: `dir` is the current test's directory, `world(options)`
// opens a World by `open(dir, options)` and closes it (then removes the directory) when the
// test ends.
import { afterEach, beforeEach } from 'vitest';

import { tempDir } from './helpers.mjs';

export function worldsPerTest(open) {
  let tmp;
  const worlds = [];
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(async () => {
    for (const w of worlds.splice(0)) await w.close();
    tmp.cleanup();
  });
  return {
    get dir() {
      return tmp.dir;
    },
    world(options) {
      return this.track(open(tmp.dir, options));
    },
    track(w) {
      worlds.push(w);
      return w;
    },
  };
}
