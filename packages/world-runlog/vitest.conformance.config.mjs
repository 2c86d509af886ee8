import { defineConfig } from 'vitest/config';

// `npm run conformance`: the SDK's conformance suite (conformance/world.conformance.mjs).
// The suite's tests start one server each and run in sequence within the file.
export default defineConfig({
  test: {
    include: ['conformance/**/*.conformance.mjs'],
    setupFiles: ['./test/setup/promise-with-resolvers.mjs'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
