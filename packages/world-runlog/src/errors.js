// Errors of the runlog addon, and their translation into the Workflow SDK's error classes.
//
// Every rejection of the addon is an `Error` with a stable string `code` (ERROR_CODES), the
// `className` of the SDK error it stands for, the code's HTTP-like `status` (none for
// CLOSED) and the fields of the failure (FENCED: runId, expected, actual; CORRUPT: runId,
// segment, offset, detail; TOO_EARLY: retryAfter; ...). Codes, statuses and classes come
// from one table in Rust (crates/runlog-world/src/error_table.rs, docs/ERRORS.md), from
// which src/error-codes.js is generated. The World must throw the SDK's classes: the
// runtime dispatches on their `name` (`EntityConflictError.is(e)` and so on).
// `toWorkflowError` does that translation.
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
// A namespace import, not a named one: `@workflow/world` is a peer dependency, and the 4.x
// line's (4.5.0) has no AttributeValidationError; a named import of it would fail to link
// there. On that line an error of the same name serves: the runtime matches it by name too.
import * as workflowWorld from '@workflow/world';

import { ERROR_CODES, ERROR_STATUS } from './error-codes.js';

export { ERROR_CODES, ERROR_RETRYABLE, ERROR_STATUS } from './error-codes.js';

/** The line's `AttributeValidationError`, or one of that name where the line has none (4.x). */
export const AttributeValidationError =
  workflowWorld.AttributeValidationError ??
  class AttributeValidationError extends Error {
    constructor(message) {
      super(message);
      this.name = 'AttributeValidationError';
    }
  };

/** Whether `err` is a rejection of the addon (optionally with the given code). */
export function isRunlogError(err, code) {
  return (
    err instanceof Error &&
    typeof err.code === 'string' &&
    Object.hasOwn(ERROR_CODES, err.code) &&
    (code === undefined || err.code === code)
  );
}

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

/**
 * An error with a code and no class: made in JavaScript on the addon's pattern (bad input
 * found by src/validate.js, a stream owner the index does not record). `WorkflowWorldError`
 * with the code's status (the error table's, src/error-codes.js).
 */
function fromCode(err) {
  if (!Object.hasOwn(ERROR_STATUS, err.code)) return undefined;
  return new WorkflowWorldError(err.message, { status: ERROR_STATUS[err.code] ?? undefined, code: err.code });
}

/**
 * The Workflow SDK error for a rejection of the addon: the class named by its `className`
 * (every rejection carries one, with the code's `status`), else `WorkflowWorldError` with the
 * status of its `code`. The original error is kept as `cause`. Anything else is returned
 * unchanged.
 */
export function toWorkflowError(err) {
  if (!(err instanceof Error)) return err;
  const translated =
    (typeof err.className === 'string' && fromClassName(err)) ||
    (typeof err.code === 'string' && fromCode(err));
  return translated ? withCause(translated, err) : err;
}
