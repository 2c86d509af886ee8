// The argument types of the World's storage and streams methods, checked in one place.
//
// Every method of `createWorld()`'s storage is given its arguments through `checked`, which
// compares them with the method's signature below before anything else runs: an argument
// of the wrong type (a number for an id, an object for a chunk, a string for params,
// `undefined` where one is required) rejects with the same INVALID_INPUT error the addon
// gives for bad input (`code`, `field`, `reason`), which `toWorkflowError` turns into
// `WorkflowWorldError` 400. Without it, such an argument would reach code that assumes its
// type and fail with whatever that code throws (a TypeError "reading 'length'"), or be
// dropped silently (`JSON.stringify` of a function is `undefined`: default params).
// What a well-typed value means (a run id's format, a limit's bounds) is the addon's to
// check; this module checks types only.
import { toWorkflowError } from './errors.js';

/** The addon's INVALID_INPUT error: `field: reason`, with `code`, `field` and `reason`. */
export function invalidInput(field, reason, cause) {
  const err = new Error(`${field}: ${reason}`, cause === undefined ? undefined : { cause });
  err.code = 'INVALID_INPUT';
  err.field = field;
  err.reason = reason;
  return err;
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v);
const isChunk = (v) => typeof v === 'string' || v instanceof Uint8Array;
const isThenable = (v) => v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';

/**
 * Each kind of argument: whether a value is of it, and what it must be. Each check returns
 * `null` (fine) or `[field, reason]`, so that a kind can name the element at fault.
 */
const KINDS = Object.freeze({
  string: (v, field) => (typeof v === 'string' ? null : [field, 'must be a string']),
  /** `events.create`'s run id: absent only for `run_created` (the addon's rule). */
  optionalString: (v, field) => (v == null || typeof v === 'string' ? null : [field, 'must be a string, null or undefined']),
  /** The streams' writes take the run id as a string or a promise of one (checked when it settles). */
  stringOrPromise: (v, field) => (typeof v === 'string' || isThenable(v) ? null : [field, 'must be a string or a promise of one']),
  object: (v, field) => (isObject(v) ? null : [field, 'must be an object']),
  optionalObject: (v, field) => (v == null || isObject(v) ? null : [field, 'must be an object, null or undefined']),
  chunk: (v, field) => (isChunk(v) ? null : [field, 'must be a string or a Uint8Array']),
  chunks: (v, field) => {
    if (!Array.isArray(v)) return [field, 'must be an array of strings or Uint8Arrays'];
    const at = v.findIndex((c) => !isChunk(c));
    return at < 0 ? null : [`${field}[${at}]`, 'must be a string or a Uint8Array'];
  },
  optionalInteger: (v, field) => (v === undefined || Number.isSafeInteger(v) ? null : [field, 'must be an integer']),
  /** `runs.getMany`'s ids. */
  strings: (v, field) => {
    if (!Array.isArray(v)) return [field, 'must be an array of strings'];
    const at = v.findIndex((x) => typeof x !== 'string');
    return at < 0 ? null : [`${field}[${at}]`, 'must be a string'];
  },
  /** `events.createBatch`'s items. */
  objects: (v, field) => {
    if (!Array.isArray(v)) return [field, 'must be an array of objects'];
    const at = v.findIndex((x) => !isObject(x));
    return at < 0 ? null : [`${field}[${at}]`, 'must be an object'];
  },
  /** `occurredAt` of `events.create`'s params and of `createBatch`'s items: a valid `Date` or date string. */
  optionalDate: (v, field) => {
    if (v === undefined) return null;
    const ok = (v instanceof Date || typeof v === 'string') && !Number.isNaN(new Date(v).getTime());
    return ok ? null : [field, 'must be a Date (or a date string)'];
  },
  /** `runs.list`'s `params.status` on the beta.55 line: one status or an array of them. */
  optionalStatuses: (v, field) => {
    if (v === undefined || typeof v === 'string') return null;
    if (!Array.isArray(v)) return [field, 'must be a string or an array of strings'];
    const at = v.findIndex((x) => typeof x !== 'string');
    return at < 0 ? null : [`${field}[${at}]`, 'must be a string'];
  },
});

/**
 * What each storage method takes, in order: `[field, kind]` per argument. The field names
 * are the addon's (crates/runlog-node/src/world/mod.rs), so an error names an argument the same
 * way whichever side found it.
 */
export const SIGNATURES = Object.freeze({
  runs: {
    get: [['runId', 'string'], ['params', 'optionalObject']],
    list: [['params', 'optionalObject']],
  },
  steps: {
    get: [['runId', 'string'], ['stepId', 'string'], ['params', 'optionalObject']],
    list: [['params', 'object']],
  },
  events: {
    create: [['runId', 'optionalString'], ['request', 'object'], ['params', 'optionalObject']],
    get: [['runId', 'string'], ['eventId', 'string'], ['params', 'optionalObject']],
    list: [['params', 'object']],
    listByCorrelationId: [['params', 'object']],
  },
  hooks: {
    get: [['hookId', 'string'], ['params', 'optionalObject']],
    getByToken: [['token', 'string']],
    list: [['params', 'optionalObject']],
  },
  streams: {
    write: [['runId', 'stringOrPromise'], ['name', 'string'], ['chunk', 'chunk']],
    writeMulti: [['runId', 'stringOrPromise'], ['name', 'string'], ['chunks', 'chunks']],
    close: [['runId', 'stringOrPromise'], ['name', 'string']],
    get: [['runId', 'string'], ['name', 'string'], ['startIndex', 'optionalInteger']],
    list: [['runId', 'string']],
    getChunks: [['runId', 'string'], ['name', 'string'], ['params', 'optionalObject']],
    getInfo: [['runId', 'string'], ['name', 'string']],
  },
});

/**
 * The members the 5.0.0-beta.55 line adds to storage (src/line-beta55.js puts them on a
 * World of that line only), checked the same way as `SIGNATURES`. `runs.list` is there
 * because its `params.status` may be an array on that line (checked by `checkArg` with
 * kind `optionalStatuses` before the list runs).
 */
export const BETA55_SIGNATURES = Object.freeze({
  runs: {
    list: [['params', 'optionalObject']],
    getMany: [['runIds', 'strings'], ['params', 'optionalObject']],
    waitForTerminalStatus: [['runId', 'string'], ['params', 'optionalObject']],
    cancelMany: [['request', 'object']],
  },
  events: {
    createBatch: [['runId', 'string'], ['events', 'objects'], ['params', 'optionalObject']],
  },
});

/** The INVALID_INPUT error for `value` as an argument `field` of `kind`, or `null`. */
export function checkArg(field, kind, value) {
  const bad = KINDS[kind](value, field);
  return bad === null ? null : invalidInput(bad[0], bad[1]);
}

/** The INVALID_INPUT error for the first argument of `args` that breaks `signature`, or `null`. */
function checkArgs(signature, args) {
  for (let i = 0; i < signature.length; i++) {
    const err = checkArg(signature[i][0], signature[i][1], args[i]);
    if (err !== null) return err;
  }
  return null;
}

/**
 * `f` (a storage method returning a promise) with its arguments checked against the
 * signature of `namespace.method` in `signatures` (`SIGNATURES`, or `BETA55_SIGNATURES`)
 * first: a bad one rejects with `WorkflowWorldError` 400 (code INVALID_INPUT, the
 * addon-shaped error as `cause`) and `f` is not called.
 */
export function checked(namespace, method, f, signatures = SIGNATURES) {
  const signature = signatures[namespace][method];
  return (...args) => {
    const err = checkArgs(signature, args);
    return err === null ? f(...args) : Promise.reject(toWorkflowError(err));
  };
}
