// world-runlog: a Workflow SDK World on runlog. WORKFLOW_TARGET_WORLD=<path to this package>
// selects it; @workflow/core's createWorldFromModule calls createWorld() with no arguments.
export { createWorld } from './src/world.js';
export { resolveConfig, isPostgresUrl, DEFAULT_DATA_DIR } from './src/config.js';
export { ERROR_CODES, isRunlogError, toWorkflowError } from './src/errors.js';
export { STORAGE_METHODS } from './src/storage.js';
export { BETA55_METHODS } from './src/line-beta55.js';
export { Store, threadPoolStats, version, addonPath, addonSource } from './src/native.js';
