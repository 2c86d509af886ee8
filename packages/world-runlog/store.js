// The runlog store alone, without the World: `import { Store } from 'world-runlog/store'`.
export { Store, threadPoolStats, version, addonPath, addonSource } from './src/native.js';
export { ERROR_CODES, isRunlogError } from './src/errors.js';
