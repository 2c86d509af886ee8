import { defineConfig } from 'vitest/config';

// `npm test`: the addon and the package. The conformance harness has its own config
// (vitest.conformance.config.mjs).
export default defineConfig({
  test: {
    include: ['test/**/*.test.mjs'],
    setupFiles: ['./test/setup/promise-with-resolvers.mjs'],
    // Child processes and a fork per file: a test that blocks libuv's pool or spawns
    // `node` does not share a process with the others.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
