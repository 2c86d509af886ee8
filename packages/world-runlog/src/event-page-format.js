// Generated from the event page's encoder (crates/runlog-node/src/event_page.rs) by crates/runlog-node/src/event_page/files.rs; do not edit. Rewrite with RUNLOG_WRITE_GENERATED=1 cargo test -p runlog-node generated_event_page
// The wire form of event pages: docs/EVENT-PAGE.md.

/** What the decoder does at a revive place of an event page, by the number that starts the place's `fixPaths` entry. */
export const FIX_KIND = Object.freeze({
  /** a binary value's {__type: 'Uint8Array', data} object: decode its base64 `data` into a Uint8Array */
  BINARY_OBJECT: 0,
  /** a string under a date key: a Date when it parses as one, else left a string */
  DATE: 1,
  /** a binary value sent as bytes: the integer k there stands for bins[2k] (offset) and bins[2k+1] (length) into the page's bytes */
  BINARY_BYTES: 2,
});

/** Keys whose string values are dates in the SDK's entities and event data: a string under one of them (not directly in an array) becomes a `Date` when it parses as one (places of kind DATE, and the generic reviver). */
export const DATE_KEYS = Object.freeze(['createdAt', 'updatedAt', 'startedAt', 'completedAt', 'retryAfter', 'resumeAt', 'expiredAt', 'tokenRetentionUntil']);

/** Keys whose values are left as JSON has them, never looked into (a run's attributes: strings whatever their names). */
export const PLAIN_KEYS = Object.freeze(['attributes']);
