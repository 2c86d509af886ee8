// The addon's event pages (docs/EVENT-PAGE.md) decoded into the SDK's events, and a large
// `events.list` page fetched as slices.
import { FIX_KIND } from './event-page-format.js';
import { revive, SHAPE, toJson } from './codec.js';

/** The binary part's header: four 32-bit words (docs/EVENT-PAGE.md). */
const HEADER_BYTES = 16;
/** `corrLen` of an event without a correlation id. */
const NO_VALUE = 0xffffffff;
/** `flags` bit: the event has no `eventData`. */
const FLAG_NO_DATA = 1;

/**
 * The binary part as memory whose start is 8-aligned (its `Float64Array` columns need it);
 * copied only when the Buffer does not start on such a boundary.
 */
function aligned(part) {
  if (part.byteOffset % 8 === 0) return part;
  const copy = new Uint8Array(part.byteLength);
  copy.set(part);
  return copy;
}

/**
 * An event page in the addon's wire form (docs/EVENT-PAGE.md), `[text, part | null, ...]`:
 * the text holds the data of every event, the event ids and correlation ids each as one
 * string, the run id, the event types and the revive paths; the binary part holds the
 * numbers: `createdAt`, `specVersion`, each event's type index, the lengths of its ids,
 * whether it has data, the revive places (`fix` pairs `[event index, path index]` into
 * `fixPaths`, each path `[kind, 'eventData', key or index...]` with a kind of `FIX_KIND`,
 * src/event-page-format.js, generated from the encoder) and the bytes of binary values.
 * Building each event here and reviving just those places gives what `fromJson` gives for
 * the same events (`SHAPE.event`), without visiting every value of every event.
 */
export function fromEventPage(wire) {
  const [text, part] = wire;
  const page = JSON.parse(text);
  if (page.walk) return revive({ data: page.data, cursor: page.cursor, hasMore: page.hasMore }, SHAPE.eventPage);
  const { run, runs, ids, corr, typeNames, data: payloads, fixPaths } = page;
  const mem = aligned(part);
  const [n, fixes, bins, bytesAt] = new Uint32Array(mem.buffer, mem.byteOffset, 4);
  const f64 = new Float64Array(mem.buffer, mem.byteOffset + HEADER_BYTES, 2 * n);
  const u32 = new Uint32Array(mem.buffer, mem.byteOffset + HEADER_BYTES + 16 * n, 4 * n + 2 * fixes + 2 * bins);
  // A plain Uint8Array over the bytes: its `slice` makes plain Uint8Array copies.
  const bin = new Uint8Array(mem.buffer, mem.byteOffset + bytesAt, mem.byteLength - bytesAt);
  const data = new Array(n);
  let idAt = 0;
  let corrAt = 0;
  for (let i = 0; i < n; i++) {
    const runId = run ?? runs[i];
    const eventId = ids.slice(idAt, (idAt += u32[n + i]));
    const eventType = typeNames[u32[i]];
    const corrLen = u32[2 * n + i];
    const spec = f64[n + i];
    if (corrLen !== NO_VALUE && (u32[3 * n + i] & FLAG_NO_DATA) === 0 && spec !== -1) {
      // Every field present (most events): one literal, its keys in the SDK's order.
      const correlationId = corr.slice(corrAt, (corrAt += corrLen));
      data[i] = { runId, eventId, eventType, correlationId, eventData: payloads[i], createdAt: new Date(f64[i]), specVersion: spec };
      continue;
    }
    const e = { runId, eventId, eventType };
    if (corrLen !== NO_VALUE) e.correlationId = corr.slice(corrAt, (corrAt += corrLen));
    if ((u32[3 * n + i] & FLAG_NO_DATA) === 0) e.eventData = payloads[i];
    e.createdAt = new Date(f64[i]);
    if (spec !== -1) e.specVersion = spec;
    data[i] = e;
  }
  // `resume`: `event index, resumeId` pairs, present only on a page that has any.
  const resume = page.resume ?? [];
  for (let r = 0; r < resume.length; r += 2) data[resume[r]].resumeId = resume[r + 1];
  const fixAt = 4 * n;
  const binsAt = fixAt + 2 * fixes;
  for (let f = fixAt; f < binsAt; f += 2) {
    const path = fixPaths[u32[f + 1]];
    let parent = data[u32[f]];
    const last = path.length - 1;
    for (let k = 1; k < last; k++) parent = parent[path[k]];
    const key = path[last];
    const v = parent[key];
    const kind = path[0];
    if (kind === FIX_KIND.BINARY_BYTES) {
      const at = binsAt + 2 * v;
      parent[key] = bin.slice(u32[at], u32[at] + u32[at + 1]);
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

/**
 * The sizes of the first slices of a larger `events.list` page (`listEventsInSlices`): small,
 * so that JavaScript starts building events one round trip after the call, while Rust writes
 * the next slice.
 */
export const EVENTS_SLICES_FIRST = Object.freeze([50, 150]);
/** Most events of each slice after those. */
export const EVENTS_SLICE = 700;
/** A page of more events than this is listed in slices. */
export const EVENTS_SLICED_ABOVE = EVENTS_SLICES_FIRST[0] + EVENTS_SLICES_FIRST[1];
/** The World's largest page (`runlog_world::PAGE_LIMIT_MAX`): a larger `limit` lists this many. */
export const PAGE_LIMIT_MAX = 1000;

/** The slice sizes of a page of `limit` events: `EVENTS_SLICES_FIRST`, then `EVENTS_SLICE` each. */
export function sliceSizes(limit) {
  const sizes = [];
  let at = 0;
  for (let k = 0; at < limit; k++) {
    const n = Math.min(EVENTS_SLICES_FIRST[k] ?? EVENTS_SLICE, limit - at);
    sizes.push(n);
    at += n;
  }
  return sizes;
}

/**
 * A run's `events.list` page of more than `EVENTS_SLICED_ABOVE` events, by the addon's
 * `eventsListSlices` (`listSlices(text, sizes)`): one job on one of its threads lists the
 * slices of `sliceSizes` one after another, each after the cursor of the one before, and
 * settles each slice's promise as soon as it is written, so JavaScript builds a slice while
 * the next is written. Together they are the page one call lists: the same events in the
 * same order, and the last slice's cursor and `hasMore`.
 */
export async function listRunEventsInSlices(listSlices, params) {
  const pagination = params?.pagination ?? {};
  const wires = listSlices(toJson(params), sliceSizes(Math.min(pagination.limit, PAGE_LIMIT_MAX)));
  // Handled at once: the slices after one that failed reject too, unread.
  for (const wire of wires) wire.catch(() => {});
  const data = [];
  let page;
  for (const wire of wires) {
    const w = await wire;
    if (w === null) break;
    page = fromEventPage(w);
    for (const e of page.data) data.push(e);
  }
  return { data, cursor: page.cursor, hasMore: page.hasMore };
}

/** Whether a page of `params` is listed in slices. */
export function sliced(params) {
  const limit = params?.pagination?.limit;
  return Number.isInteger(limit) && limit > EVENTS_SLICED_ABOVE;
}

/**
 * `listByCorrelationId` (by `list`) for a page of more than `EVENTS_SLICED_ABOVE` events, as
 * consecutive slices of `sliceSizes`, each asked for with the cursor of the one before,
 * before that one is parsed. The log only grows, so the slices together are the page one
 * call would have listed: the same events in the same order, and the last slice's cursor
 * and `hasMore`.
 */
export async function listEventsInSlices(list, params) {
  if (!sliced(params)) return fromEventPage(await list(toJson(params)));
  const pagination = params.pagination;
  const sizes = sliceSizes(Math.min(pagination.limit, PAGE_LIMIT_MAX));
  const ask = (cursor, n) => {
    const wire = list(toJson({ ...params, pagination: { ...pagination, cursor, limit: n } }));
    // Handled at once: a slice left unread after an earlier one failed must not leave its
    // rejection unhandled.
    wire.catch(() => {});
    return wire;
  };
  const data = [];
  let wire = await ask(pagination.cursor, sizes[0]);
  for (let k = 1; ; k++) {
    const [, , next, hasMore] = wire;
    // A slice with more after it was full.
    const following = hasMore && k < sizes.length ? ask(next, sizes[k]) : null;
    const page = fromEventPage(wire);
    for (const e of page.data) data.push(e);
    if (following === null) return { data, cursor: page.cursor, hasMore: page.hasMore };
    wire = await following;
  }
}
