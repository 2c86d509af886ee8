// Generated from the event page's encoder (crates/runlog-node/src/event_page.rs) by crates/runlog-node/src/event_page/files.rs; do not edit. Rewrite with RUNLOG_WRITE_GENERATED=1 cargo test -p runlog-node generated_event_page
// The wire form of event pages: docs/EVENT-PAGE.md.

/** What the decoder does at a revive place of an event page, by the number that starts the place's `fixPaths` entry. */
export const FIX_KIND = Object.freeze({
  /** a binary value's {__type: 'Uint8Array', data} object: decode its base64 `data` into a Uint8Array */
  BINARY_OBJECT: 0,
  /** a string at a date field of the event's data (REVIVED_DATES.eventData): a Date when it parses as one, else left a string */
  DATE: 1,
  /** a binary value sent as bytes: the integer k there stands for bins[2k] (offset) and bins[2k+1] (length) into the page's bytes */
  BINARY_BYTES: 2,
});

/**
 * Where a string becomes a `Date` when it parses as one (else it stays the string), as @workflow/world-local's schemas
 * revive (`z.coerce.date()`), and nowhere else: `eventData` fields by event type (top level of the data; places of kind DATE),
 * and the top-level fields of each entity the World returns. Binary values have no table: every
 * {__type: 'Uint8Array', data: <string>} object is bytes, at any depth.
 */
export const REVIVED_DATES = Object.freeze({
  eventData: Object.freeze({
    step_retrying: Object.freeze(['retryAfter']),
    hook_created: Object.freeze(['tokenRetentionUntil']),
    wait_created: Object.freeze(['resumeAt']),
    wait_completed: Object.freeze(['resumeAt']),
  }),
  entities: Object.freeze({
    event: Object.freeze(['createdAt', 'occurredAt']),
    run: Object.freeze(['createdAt', 'updatedAt', 'startedAt', 'completedAt', 'expiredAt']),
    step: Object.freeze(['createdAt', 'updatedAt', 'startedAt', 'completedAt', 'retryAfter']),
    hook: Object.freeze(['createdAt', 'tokenRetentionUntil']),
    wait: Object.freeze(['createdAt', 'updatedAt', 'resumeAt', 'completedAt']),
  }),
});
