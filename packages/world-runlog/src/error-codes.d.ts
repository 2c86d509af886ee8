// Generated from the error table (crates/runlog-world/src/error_table.rs) by crates/runlog-node/src/errors/files.rs; do not edit. Rewrite with RUNLOG_WRITE_GENERATED=1 cargo test -p runlog-node generated_error_files

/** A stable error code of the addon (see ERROR_CODES). */
export type RunlogErrorCode =
  | 'INVALID_INPUT'
  | 'NOT_FOUND'
  | 'EXISTS'
  | 'FENCED'
  | 'DUPLICATE'
  | 'BUSY'
  | 'CORRUPT'
  | 'UNSUPPORTED_VERSION'
  | 'NOT_A_STORE'
  | 'READ_ONLY'
  | 'DISK_FULL'
  | 'POISONED'
  | 'IO'
  | 'PANICKED'
  | 'CLOSED'
  | 'OUT_OF_RANGE'
  | 'INTERNAL'
  | 'UNKNOWN'
  | 'UNSUPPORTED'
  | 'CONFLICT'
  | 'GONE'
  | 'PRECONDITION_FAILED'
  | 'TOO_EARLY'
  | 'STREAM_CLOSED'
  | 'ABORTED';

/** The `name` of the Workflow SDK error class a rejection stands for (its `className`). */
export type RunlogErrorClassName =
  | 'AttributeValidationError'
  | 'EntityConflictError'
  | 'HookNotFoundError'
  | 'PreconditionFailedError'
  | 'RunExpiredError'
  | 'RunNotSupportedError'
  | 'TooEarlyError'
  | 'WorkflowRunNotFoundError'
  | 'WorkflowWorldError';

export declare const ERROR_CODES: Readonly<Record<RunlogErrorCode, string>>;
export declare const ERROR_STATUS: Readonly<Record<RunlogErrorCode, number | null>>;
export declare const ERROR_RETRYABLE: Readonly<Record<RunlogErrorCode, boolean>>;
