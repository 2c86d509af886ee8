// Loads the runlog addon (crates/runlog-node), built by crates/runlog-node/build.sh into
// native/runlog_node.node. RUNLOG_NODE_ADDON names another build (an absolute path).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);

/** Where the addon is looked for, in order. */
export const addonPath =
  process.env.RUNLOG_NODE_ADDON || fileURLToPath(new URL('../native/runlog_node.node', import.meta.url));

function load() {
  if (!existsSync(addonPath)) {
    const err = new Error(
      `runlog addon not found at ${addonPath}: build it with crates/runlog-node/build.sh ` +
        '(or npm run build:addon in packages/world-runlog), or set RUNLOG_NODE_ADDON',
    );
    err.code = 'ADDON_NOT_BUILT';
    throw err;
  }
  return require(addonPath);
}

const addon = load();

/** The store class of the addon: `Store.open(dir, options?)`, `Store.openReadOnly(...)`. */
export const Store = addon.Store;
/** Counters of the addon's worker threads (`io` and `wait` lanes). */
export const threadPoolStats = addon.threadPoolStats;
/** The addon's version. */
export const version = addon.version;
/** Test hook: a panic inside the addon, which must reject with PANICKED. */
export const panicForTest = addon.__panicForTest;
