// Errors of the runlog addon, and their translation into the Workflow SDK's error classes.
//
// Every rejection of the addon is an `Error` with a stable string `code` (ERROR_CODES) and
// the fields of the failure (FENCED: runId, expected, actual; CORRUPT: runId, segment,
// offset, detail; ...). The World must throw the SDK's classes instead: the runtime
// dispatches on their `name` (`EntityConflictError.is(e)` and so on). `toWorkflowError`
// does that translation, for store errors and for the World layer's: the addon's World
// (crates/runlog-node/src/world.rs, `WorldError::class_name()` / `status()`) rejects with
// `className`, `status` and, where they apply, `runId`, `hook`, `retryAfter`, `found`,
// `supported`.
import {
  EntityConflictError,
  HookNotFoundError,
  PreconditionFailedError,
  RunExpiredError,
  RunNotSupportedError,
  TooEarlyError,
  WorkflowRunNotFoundError,
  WorkflowWorldError,
} from '@workflow/errors';
import { AttributeValidationError } from '@workflow/world';

/** Every `code` a rejection of the addon can carry, with what it means. */
export const ERROR_CODES = Object.freeze({
  INVALID_INPUT: 'an argument is malformed or out of bounds (field names it); nothing was written',
  NOT_FOUND: 'the run does not exist',
  EXISTS: 'createRun on a run that exists',
  FENCED: 'appendDecisions: the log is not at expectedSeq (expected, actual); nothing was written',
  DUPLICATE: 'appendDecisions: a key or event id already stored (key, seq); nothing was written',
  BUSY: "another process held the run's lock past the timeout (holder, waitedMs)",
  CORRUPT: 'stored bytes failed validation (runId, segment, offset, detail)',
  UNSUPPORTED_VERSION: 'the store was written by another format version (path, found, supported)',
  NOT_A_STORE: 'the directory is not a runlog store (path, detail)',
  READ_ONLY: 'a write on a read-only store (openReadOnly, or openOrReadOnly on a store this process cannot write) (op, path); nothing was written; WorkflowWorldError status 403 through the World',
  DISK_FULL: 'the file system is full (op, path); nothing a reader can see was written',
  POISONED: 'an earlier fsync of the run failed; it refuses writes until the store is reopened',
  IO: 'the operating system failed a call (op, path, errno), or PostgreSQL did (path `postgres`: server unreachable, connection lost, statement refused)',
  PANICKED: 'a panic in the store or the binding was caught (detail); the process goes on',
  CLOSED: 'the store was closed',
  OUT_OF_RANGE: 'a value the store returned exceeds Number.MAX_SAFE_INTEGER',
  INTERNAL: 'a Node-API call failed',
  UNKNOWN: 'a store error this binding does not know yet',
  UNSUPPORTED: 'the call does not exist on this backend (op): commitStats on a PostgreSQL store',
  CONFLICT: 'World: the request conflicts with the run (a terminal run, an entity created twice, a repeated event id); className EntityConflictError, status 409',
  GONE: 'World: the run ended (RunExpiredError, status 410)',
  PRECONDITION_FAILED: 'World: an event newer than stateUpdatedAt (PreconditionFailedError, status 412)',
  TOO_EARLY: 'World: the step may not start before its retryAfter (TooEarlyError, status 425, retryAfter in seconds)',
  STREAM_CLOSED: 'World streams: a write to a closed stream; nothing was written (status 409)',
});

/** Whether `err` is a rejection of the addon (optionally with the given code). */
export function isRunlogError(err, code) {
  return (
    err instanceof Error &&
    typeof err.code === 'string' &&
    Object.hasOwn(ERROR_CODES, err.code) &&
    (code === undefined || err.code === code)
  );
}

/** HTTP-like status of a store error seen through the World (5xx: the runtime retries). */
const STORE_STATUS = Object.freeze({
  INVALID_INPUT: 400,
  FENCED: 409,
  BUSY: 503,
  DISK_FULL: 507,
  CORRUPT: 500,
  UNSUPPORTED_VERSION: 500,
  NOT_A_STORE: 500,
  // Not retryable: no write can succeed on a store this process cannot write.
  READ_ONLY: 403,
  POISONED: 500,
  IO: 500,
  PANICKED: 500,
  OUT_OF_RANGE: 500,
  INTERNAL: 500,
  UNKNOWN: 500,
  UNSUPPORTED: 501,
});

function withCause(error, cause) {
  if (error.cause === undefined) {
    Object.defineProperty(error, 'cause', { value: cause, configurable: true, writable: true });
  }
  return error;
}

function fromClassName(err) {
  switch (err.className) {
    case 'WorkflowRunNotFoundError':
      return new WorkflowRunNotFoundError(err.runId ?? '');
    case 'HookNotFoundError':
      return new HookNotFoundError(err.hook ?? err.token ?? '');
    case 'EntityConflictError':
      return new EntityConflictError(err.message);
    case 'RunExpiredError':
      return new RunExpiredError(err.message);
    case 'TooEarlyError':
      return new TooEarlyError(err.message, { retryAfter: err.retryAfter });
    case 'PreconditionFailedError':
      return new PreconditionFailedError(err.message);
    case 'RunNotSupportedError':
      return new RunNotSupportedError(err.found, err.supported);
    case 'AttributeValidationError':
      return new AttributeValidationError(err.message);
    case 'WorkflowWorldError':
      return new WorkflowWorldError(err.message, { status: err.status, code: err.code });
    default:
      return undefined;
  }
}

function fromStoreCode(err) {
  switch (err.code) {
    case 'NOT_FOUND':
      return new WorkflowRunNotFoundError(err.runId ?? '');
    case 'EXISTS':
    case 'DUPLICATE':
      return new EntityConflictError(err.message);
    case 'CLOSED':
      // No status: nothing to retry on a closed World.
      return new WorkflowWorldError(err.message, { code: 'CLOSED' });
    default:
      if (STORE_STATUS[err.code] === undefined) return undefined;
      return new WorkflowWorldError(err.message, { status: STORE_STATUS[err.code], code: err.code });
  }
}

/**
 * The Workflow SDK error for a rejection of the addon: the class named by `className` (the
 * World layer's errors), else the class or `WorkflowWorldError` status for a store `code`.
 * The original error is kept as `cause`. Anything else is returned unchanged.
 */
export function toWorkflowError(err) {
  if (!(err instanceof Error)) return err;
  const translated =
    (typeof err.className === 'string' && fromClassName(err)) ||
    (typeof err.code === 'string' && fromStoreCode(err));
  return translated ? withCause(translated, err) : err;
}
