// The event page's wire form (docs/EVENT-PAGE.md) from both ends: the pages in
// fixtures/event-page.json are written by the addon's encoder (crates/runlog-node/src/
// event_page/files.rs, checked for staleness by `cargo test -p runlog-node
// generated_event_page`) and decoded here by the package's own decoder (`fromEventPage`).
// Each page decodes to exact values, and every event to what the package's reviver
// (`fromJson` as an event, `SHAPE.event`) gives for the stored event. The place kinds and
// the date fields are the generated constants.
import { readFileSync } from 'node:fs';

import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { FIX_KIND, REVIVED_DATES } from '../src/event-page-format.js';
import { fromEventPage, fromJson, SHAPE } from '../src/storage.js';
import { storeTarget, tempDir } from './helpers.mjs';

const fixture = JSON.parse(readFileSync(new URL('./fixtures/event-page.json', import.meta.url), 'utf8'));
const pages = new Map(fixture.pages.map((p) => [p.name, p]));

/**
 * The page's wire tuple as the addon resolves it, its binary part a Buffer that does not
 * start at offset 0 of its memory, nor on an 8-byte boundary (as a Buffer from a pool may
 * not): the decoder's number columns must not depend on where the Buffer starts.
 */
function wire(name) {
  const [text, bytes, cursor, hasMore] = pages.get(name).wire;
  if (bytes === null) return [text, null, cursor, hasMore];
  const raw = Buffer.from(bytes, 'base64');
  const memory = Buffer.alloc(raw.length + 7, 0xee);
  raw.copy(memory, 5);
  return [text, memory.subarray(5, 5 + raw.length), cursor, hasMore];
}

const decode = (name) => fromEventPage(wire(name));

describe('the generated constants', () => {
  test('name the three place kinds by number, and the date fields of world-local’s schemas by event type and entity', () => {
    expect(FIX_KIND).toStrictEqual({ BINARY_OBJECT: 0, DATE: 1, BINARY_BYTES: 2 });
    expect(Object.isFrozen(FIX_KIND)).toBe(true);
    expect(REVIVED_DATES).toStrictEqual({
      eventData: {
        step_retrying: ['retryAfter'],
        hook_created: ['tokenRetentionUntil'],
        wait_created: ['resumeAt'],
        wait_completed: ['resumeAt'],
      },
      entities: {
        event: ['createdAt', 'occurredAt'],
        run: ['createdAt', 'updatedAt', 'startedAt', 'completedAt', 'expiredAt'],
        step: ['createdAt', 'updatedAt', 'startedAt', 'completedAt', 'retryAfter'],
        hook: ['createdAt', 'tokenRetentionUntil'],
        wait: ['createdAt', 'updatedAt', 'resumeAt', 'completedAt'],
      },
    });
    expect(Object.isFrozen(REVIVED_DATES.eventData.wait_created)).toBe(true);
  });

  test('every kind is in the fixture, and no other', () => {
    const kinds = new Set();
    for (const page of fixture.pages) {
      const parsed = JSON.parse(page.wire[0]);
      for (const path of parsed.fixPaths ?? []) kinds.add(path[0]);
    }
    expect([...kinds].sort()).toStrictEqual(Object.values(FIX_KIND).sort());
  });
});

describe('pages written by the encoder, decoded by fromEventPage', () => {
  test('the fixture holds the pages this file expects', () => {
    expect([...pages.keys()]).toStrictEqual(['docExample', 'oneRun', 'severalRuns', 'severalRunsWalk', 'empty', 'onlyEmptyBytes', 'revivePlaces']);
    expect(fixture.generated).toMatch(/RUNLOG_WRITE_GENERATED=1 cargo test -p runlog-node generated_event_page$/);
  });

  test('the example of docs/EVENT-PAGE.md decodes as the page says', () => {
    const event = (eventId, eventType, createdAt) => ({ runId: 'wrun_1', eventId, eventType, correlationId: 'step_1', createdAt: new Date(createdAt), specVersion: 5 });
    expect(decode('docExample')).toStrictEqual({
      data: [
        { ...event('evnt_0', 'step_created', 1_764_510_048_882), eventData: { stepName: 'add', input: new Uint8Array([1, 2]), meta: { createdAt: '2026-12-01T00:00:00.000Z' } } },
        event('evnt_1', 'step_started', 1_764_510_048_887),
        { ...event('evnt_2', 'step_retrying', 1_764_510_048_899), eventData: { error: new Uint8Array([1]), retryAfter: new Date('2026-12-01T00:00:00.000Z') } },
      ],
      cursor: 'seq:3',
      hasMore: false,
    });
  });

  test('one run: every place kind, escapes, text beyond the BMP, the largest integers, dates that are and are not', () => {
    const page = decode('oneRun');
    const run = { runId: 'wrun_fixture' };
    expect(page).toStrictEqual({
      data: [
        {
          ...run,
          eventId: 'evnt_0',
          eventType: 'run_created',
          eventData: { deploymentId: 'dpl_1', workflowName: 'workflow//./src/wf//main', input: new Uint8Array([1, 2, 3, 255]) },
          createdAt: new Date(1_764_510_048_882),
          specVersion: 5,
        },
        {
          ...run,
          eventId: 'evnt_1',
          eventType: 'step_created',
          correlationId: 'step_1',
          eventData: {
            stepName: 'step//add',
            // User data: binary values are bytes at any depth, and nothing is a date,
            // whatever its key.
            input: [new Uint8Array([0]), '2026-01-01T00:00:00.000Z', { resumeAt: '2026-11-30T10:00:00.000Z' }],
            meta: { retryAfter: '2026-11-30T10:00:01.500Z', startedAt: 'soon', completedAt: 5, expiredAt: null },
          },
          createdAt: new Date(1_764_510_048_889),
          specVersion: 5,
        },
        // No data, no spec version: the keys are absent, not undefined.
        { ...run, eventId: 'evnt_2', eventType: 'step_started', correlationId: 'step_1', createdAt: new Date(1_764_510_048_889) },
        {
          ...run,
          eventId: 'evnt_3',
          eventType: 'step_completed',
          correlationId: 'step "1" ☃',
          eventData: {
            result: { text: 'héllo ☃ 𝄞 "q" \\ \n\u0000', ключ: 'значение 🎉', esc\u00e9: '\u{1F600}' },
            output: new Uint8Array(0),
          },
          createdAt: new Date(1_764_510_050_000),
          specVersion: 5,
        },
        {
          ...run,
          eventId: 'evnt_4',
          eventType: 'hook_created',
          correlationId: 'hook_1',
          eventData: {
            token: 't',
            n: Number.MAX_SAFE_INTEGER,
            neg: -Number.MAX_SAFE_INTEGER,
            // u64::MAX in the payload: JSON.parse's nearest double, as for the stored text.
            big: 2 ** 64,
            f: 1.5e300,
            small: -0.000001,
            t: true,
            z: null,
            arr: [1, [2, [3, []]], {}],
          },
          // The latest instant a Date holds, and the largest spec version.
          createdAt: new Date(8.64e15),
          specVersion: 4_294_967_295,
        },
        {
          ...run,
          eventId: 'evnt_5',
          eventType: 'wait_created',
          correlationId: 'wait_1',
          // Left as objects (non-canonical base64, an escaped type name): decoded here.
          eventData: { resumeAt: new Date('2026-12-01T00:00:00.000Z'), list: [new Uint8Array([1]), new Uint8Array([1, 2])] },
          // createdAt going back to the epoch: a negative difference.
          createdAt: new Date(0),
          specVersion: 5,
        },
      ],
      cursor: 'seq:6',
      hasMore: true,
    });
    // Fields in the order of the SDK's event shape.
    expect(Object.keys(page.data[1])).toStrictEqual(['runId', 'eventId', 'eventType', 'correlationId', 'eventData', 'createdAt', 'specVersion']);
  });

  test('binary values sent as bytes are copies, not views of the page’s buffer', () => {
    const w = wire('oneRun');
    const page = fromEventPage(w);
    const input = page.data[0].eventData.input;
    expect(input.constructor).toBe(Uint8Array);
    expect(input.buffer).not.toBe(w[1].buffer);
    w[1].fill(0);
    expect(input).toStrictEqual(new Uint8Array([1, 2, 3, 255]));
  });

  test('events of several runs carry each its run id; the fallback form of the same page decodes the same', () => {
    const page = decode('severalRuns');
    expect(page.data.map((e) => e.runId)).toStrictEqual(['wrun_a', 'wrun_b', 'wrun_a']);
    expect(page.data[1]).toStrictEqual({
      runId: 'wrun_b',
      eventId: 'evnt_b0',
      eventType: 'step_started',
      correlationId: 'step_1',
      createdAt: new Date(1_764_510_048_900),
      specVersion: 5,
    });
    expect(page.data[0].eventData).toStrictEqual({ stepName: 's', input: new Uint8Array([1, 2]) });
    expect(page.data[2].eventData).toStrictEqual({ result: { at: 'x', createdAt: '2026-01-01T00:00:00.000Z' } });
    expect([page.cursor, page.hasMore]).toStrictEqual(['c2', false]);
    expect(JSON.parse(pages.get('severalRunsWalk').wire[0]).walk).toBe(true);
    expect(decode('severalRunsWalk')).toStrictEqual(page);
  });

  test('an empty page', () => {
    expect(decode('empty')).toStrictEqual({ data: [], cursor: null, hasMore: false });
  });

  test('a page whose binary values are all empty decodes them as empty', () => {
    const page = decode('onlyEmptyBytes');
    expect(page.data[0].eventData).toStrictEqual({ deploymentId: 'd', workflowName: 'wf', input: new Uint8Array(0) });
  });

  test('under attributes binary values are bytes and nothing is a date; only the type’s own date field is', () => {
    const places = decode('revivePlaces').data;
    const of = (eventType) => places.find((e) => e.eventType === eventType && Object.hasOwn(e.eventData, 'attributes'));
    const attributes = {
      attributes: { startedAt: '2026-01-01T00:00:00.000Z', x: 'y', b: new Uint8Array([1, 2]) },
      nested: { attributes: { createdAt: '2026-01-02', blob: new Uint8Array([0]) } },
      attributes2: { attributes: new Uint8Array([1]) },
      startedAt: '2026-01-03T00:00:00.000Z',
    };
    expect(of('wait_created').eventData).toStrictEqual({ ...attributes, resumeAt: new Date('2026-01-04T00:00:00.000Z') });
    expect(of('run_created').eventData).toStrictEqual({ ...attributes, resumeAt: '2026-01-04T00:00:00.000Z' });
  });

  test('each type’s date field is a Date, the same key elsewhere stays a string', () => {
    const places = decode('revivePlaces').data;
    const of = (eventType) => places.find((e) => e.eventType === eventType).eventData;
    expect(of('step_retrying')).toStrictEqual({ error: new Uint8Array([1, 2]), retryAfter: new Date('2026-01-01T00:00:00.000Z'), resumeAt: '2026-01-02' });
    expect(of('hook_created')).toStrictEqual({ token: 't', tokenRetentionUntil: new Date('2026-01-01T00:00:00.000Z'), metadata: { tokenRetentionUntil: '2026-01-02' } });
    expect(of('wait_completed')).toStrictEqual({ resumeAt: new Date('2026-01-01T00:00:00.000Z'), retryAfter: '2026-01-02' });
    expect(of('step_created')).toStrictEqual({
      stepName: 's',
      input: { createdAt: '1', resumeAt: '2020-01-01', meta: { completedAt: '0', expiredAt: 'Tue, 1 Jan 2030' } },
      createdAt: '2026-01-01',
    });
  });

  test('every event is what the package’s reviver gives for the stored event', () => {
    expect(pages.get('revivePlaces').stored).toHaveLength(25);
    let checked = 0;
    for (const { name, stored } of fixture.pages) {
      const page = decode(name);
      expect(page.data).toHaveLength(stored.length);
      stored.forEach((text, i) => {
        const e = page.data[i];
        const plain = { ...e, createdAt: e.createdAt.toISOString() };
        if (text === null) delete plain.eventData;
        else plain.eventData = JSON.parse(text);
        expect(e, `${name} event ${i}: ${text}`).toStrictEqual(fromJson(JSON.stringify(plain), SHAPE.event));
        checked++;
      });
    }
    expect(checked).toBe(3 + 6 + 3 + 3 + 0 + 1 + 25);
  });
});

describe('through the World', () => {
  let tmp;
  let world;
  beforeEach(() => {
    tmp = tempDir();
    world = createWorld({ ...storeTarget(tmp.dir), recoverActiveRuns: false });
  });
  afterEach(async () => {
    await world.close();
    tmp.cleanup();
  });

  test('events.list of a run whose only binary value is empty lists it', async () => {
    const { run } = await world.events.create(null, {
      eventType: 'run_created',
      specVersion: 5,
      eventData: { deploymentId: 'dpl_test', workflowName: 'workflow//./t//wf', input: new Uint8Array(0) },
    });
    const page = await world.events.list({ runId: run.runId, resolveData: 'all' });
    expect(page.data.map((e) => e.eventType)).toStrictEqual(['run_created']);
    expect(page.data[0].eventData.input).toStrictEqual(new Uint8Array(0));
  });
});
