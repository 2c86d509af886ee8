// The addon's event pages (docs/EVENT-PAGE.md) decoded into the SDK's events, and a large
// `events.list` page fetched as slices.
import { FIX_KIND } from './event-page-format.js';
import { revive, toJson } from './codec.js';

/** No bytes: what a page without `bytes` points into (its binary values are all empty). */
const NO_BYTES = new Uint8Array(0);

/**
 * An event page in the addon's wire form (docs/EVENT-PAGE.md), `[text, bytes | null, ...]`:
 * one column per field, event types as indexes into `typeNames`, `createdAt` in ms since
 * the epoch as the difference from the event before, and the places the generic walk would
 * revive as `fix` pairs `[event index, path index]` into `fixPaths`, each path `[kind,
 * 'eventData', key or index...]` with a kind of `FIX_KIND` (src/event-page-format.js,
 * generated from the encoder). Building each event here and reviving just those places
 * gives what `fromJson` gives for the same events, without visiting every value of every
 * event.
 */
export function fromEventPage(wire) {
  const [text, bytes] = wire;
  const page = JSON.parse(text);
  if (page.walk) return revive({ data: page.data, cursor: page.cursor, hasMore: page.hasMore });
  const { run, runs, ids, typeNames, types, corr, data: payloads, absent, at, spec, fix, fixPaths, bins } = page;
  // A plain Uint8Array over the bytes: its `slice` makes plain Uint8Array copies.
  const bin = bytes ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : NO_BYTES;
  const data = new Array(ids.length);
  let nextAbsent = 0;
  let createdAt = 0;
  for (let i = 0; i < ids.length; i++) {
    const e = { runId: run ?? runs[i], eventId: ids[i], eventType: typeNames[types[i]] };
    if (corr[i] !== null) e.correlationId = corr[i];
    if (absent[nextAbsent] === i) nextAbsent++;
    else e.eventData = payloads[i];
    createdAt += at[i];
    e.createdAt = new Date(createdAt);
    if (spec[i] !== null) e.specVersion = spec[i];
    data[i] = e;
  }
  // `resume`: `event index, resumeId` pairs, present only on a page that has any.
  const resume = page.resume ?? [];
  for (let r = 0; r < resume.length; r += 2) data[resume[r]].resumeId = resume[r + 1];
  for (let f = 0; f < fix.length; f += 2) {
    const path = fixPaths[fix[f + 1]];
    let parent = data[fix[f]];
    const last = path.length - 1;
    for (let k = 1; k < last; k++) parent = parent[path[k]];
    const key = path[last];
    const v = parent[key];
    const kind = path[0];
    if (kind === FIX_KIND.BINARY_BYTES) {
      parent[key] = bin.slice(bins[2 * v], bins[2 * v] + bins[2 * v + 1]);
    } else if (kind === FIX_KIND.BINARY_OBJECT) {
      if (v !== null && typeof v === 'object' && typeof v.data === 'string') {
        parent[key] = new Uint8Array(Buffer.from(v.data, 'base64'));
      }
    } else if (kind === FIX_KIND.DATE && typeof v === 'string') {
      const d = new Date(v);
      if (!Number.isNaN(d.getTime())) parent[key] = d;
    }
  }
  return { data, cursor: page.cursor, hasMore: page.hasMore };
}

/** Events per addon call when a page of `events.list` is larger: see `listEventsInSlices`. */
export const EVENTS_SLICE = 300;
/** The World's largest page (`runlog_world::PAGE_LIMIT_MAX`): a larger `limit` lists this many. */
export const PAGE_LIMIT_MAX = 1000;

/**
 * `events.list` (or `listByCorrelationId`, by `list`) for a page of more than
 * `EVENTS_SLICE` events, as consecutive slices of at most that many, following cursors: the
 * next slice is asked for before this one is parsed, so that Rust reads and writes slice
 * k + 1 while JavaScript parses slice k. The log only grows and is dense, so the slices
 * together are the page one call would have listed a moment later: the same events in the
 * same order, and the last slice's cursor and `hasMore`.
 */
export async function listEventsInSlices(list, params) {
  const pagination = params?.pagination ?? {};
  if (!(Number.isInteger(pagination.limit) && pagination.limit > EVENTS_SLICE)) return fromEventPage(await list(toJson(params)));
  const limit = Math.min(pagination.limit, PAGE_LIMIT_MAX);
  const ask = (cursor, n) => list(toJson({ ...params, pagination: { ...pagination, cursor, limit: n } }));
  let remaining = limit - EVENTS_SLICE;
  let wire = await ask(pagination.cursor, EVENTS_SLICE);
  const data = [];
  for (;;) {
    const [, , cursor, hasMore] = wire;
    // A slice with more after it was full.
    const next = hasMore && remaining > 0 ? ask(cursor, Math.min(EVENTS_SLICE, remaining)) : null;
    remaining -= EVENTS_SLICE;
    // Handled at once: should this slice fail to parse, the next one's rejection is not
    // left unhandled.
    next?.catch(() => {});
    const page = fromEventPage(wire);
    for (const e of page.data) data.push(e);
    if (next === null) return { data, cursor: page.cursor, hasMore: page.hasMore };
    wire = await next;
  }
}
