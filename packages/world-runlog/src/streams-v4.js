// The 4.x Streamer: the stream methods `@workflow/world` 4.5.0 puts flat on the World, the
// stream name first (docs/SDK-LINES.md §3), which the workflow 4.x runtime calls:
//
//   writeToStream(name, runId, chunk)        writeToStreamMulti(name, runId, chunks)
//   closeStream(name, runId)                 readFromStream(name, startIndex?)  (no run id)
//   listStreamsByRunId(runId)                getStreamChunks(name, runId, {limit?, cursor?})
//   getStreamInfo(name, runId)               → {tailIndex (-1: empty), done}
//
// On 4.x a stream is identified by its name alone (world-local 4.4.1 keys chunks by name,
// records the name in the writing run's list and ignores the run id when reading), and
// names do not always carry their run: `getWritable()` names embed the run's ULID
// (`strm_<ULID>_user…`) but a stream passed through serialization is `strm_<random ULID>`.
// So each name is given an owner, the run that first wrote or closed it, in a durable index
// kept in the store (another process, or this one after a restart, reads it too), and
// every call is served by the same Rust streams as the 5.x `world.streams` under
// (owner, name) (crates/runlog-world/src/streams.rs): a stream written through one surface
// reads through the other. Writes by another run to a name already owned go to the
// owner's stream, which is where a name-keyed reader looks; that run's
// `listStreamsByRunId` does not list it.
//
// The index is one store run per stream name, created before the stream's first chunk (a
// crash in between leaves an owned name that reads as empty and open, as a name never
// written does), its metadata the owner in full:
//
//   id    stream-owner-n<E(name)>   when it fits in 128 bytes, else
//         stream-owner-h<H(name)>
//   meta  OWNER_META_MAGIC, one byte: the run id's length, the run id, the name's UTF-8 bytes
//
// with E and H as in crates/runlog-world/src/streams/id.rs (E: bytes of [A-Za-z0-9_] as
// themselves, any other byte as `-` and two hex digits; H: the first 16 bytes of SHA-256, in
// hex). The `stream-` prefix makes the runlog CLI count them among the World's own logs
// (`audit` and `export` skip them); `owner` is no `<R>` of that file's layout (those start
// with a digit or `h`), so no id is shared with a chunk or index log. A hashed id's
// recorded name is checked on every lookup.
import { createHash } from 'node:crypto';

import { toWorkflowError } from './errors.js';
import { checkArg, invalidInput } from './validate.js';

/** The first bytes of an owner record's metadata (version 1). */
export const OWNER_META_MAGIC = Buffer.from('rlsown1\0', 'latin1');
/** Longest stream name in UTF-8 bytes (the streams layer's `NAME_LEN_BYTES_MAX`). */
const NAME_LEN_BYTES_MAX = 1024;
/** A store run id: 1–128 bytes of [A-Za-z0-9_-], not starting with `-`. */
const RUN_ID_RE = /^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$/;
/** How often a reader of a name nobody has written yet looks for its owner in the store. */
const OWNER_POLL_MS = 100;

/** `E(name)`: the injective run-id-alphabet encoding of the streams layer. */
function encode(name) {
  let out = '';
  for (const b of Buffer.from(name, 'utf8')) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9_]/.test(c) ? c : `-${b.toString(16).padStart(2, '0')}`;
  }
  return out;
}

/** The store run that records the owner of stream `name`. */
export function ownerLogId(name) {
  const plain = `stream-owner-n${encode(name)}`;
  if (plain.length <= 128) return plain;
  return `stream-owner-h${createHash('sha256').update(name, 'utf8').digest('hex').slice(0, 32)}`;
}

function ownerMeta(runId, name) {
  const run = Buffer.from(runId, 'latin1');
  return Buffer.concat([OWNER_META_MAGIC, Buffer.from([run.length]), run, Buffer.from(name, 'utf8')]);
}

/** `{ runId, name }` from an owner record's metadata, or null when it is none. */
function parseOwnerMeta(meta) {
  const m = Buffer.from(meta);
  if (m.length < OWNER_META_MAGIC.length + 1 || !m.subarray(0, OWNER_META_MAGIC.length).equals(OWNER_META_MAGIC)) return null;
  const len = m[OWNER_META_MAGIC.length];
  const start = OWNER_META_MAGIC.length + 1;
  return { runId: m.subarray(start, start + len).toString('latin1'), name: m.subarray(start + len).toString('utf8') };
}

/** The INVALID_INPUT error of a stream name the streams layer would refuse, or null. */
function nameError(name) {
  if (name.length === 0) return invalidInput('name', 'empty');
  if (Buffer.byteLength(name, 'utf8') > NAME_LEN_BYTES_MAX) return invalidInput('name', `longer than ${NAME_LEN_BYTES_MAX} bytes`);
  return null;
}

/** The first INVALID_INPUT error among `[field, kind, value]` checks (names also by content), or null. */
function firstError(checks) {
  for (const [field, kind, value] of checks) {
    const err = checkArg(field, kind, value) ?? (field === 'name' ? nameError(value) : null);
    if (err !== null) return err;
  }
  return null;
}

/**
 * The 4.x Streamer over `streams` (the World's checked 5.x `streams` methods) and the store
 * (`openStore()`, memoized): `{ methods, close }`, `methods` to spread onto the World;
 * `close()` ends the readers still waiting for a stream's owner.
 */
export function createStreamerV4(streams, openStore) {
  /** name → owner run id, once known (an owner never changes). */
  const owners = new Map();
  /** Readers waiting for an owner: woken by a registration here, or by close. */
  const waiting = new Set();
  let closed = false;

  const collision = (id, found) =>
    Object.assign(new Error(`store run ${id} does not record the owner of this stream (it records ${JSON.stringify(found)})`), {
      code: 'CORRUPT',
      runId: id,
    });

  /** The owner of `name` from the index, or null when nobody has written it yet. */
  const lookup = async (name) => {
    const known = owners.get(name);
    if (known !== undefined) return known;
    const id = ownerLogId(name);
    const store = await openStore();
    let meta;
    try {
      meta = await store.runMeta(id);
    } catch (err) {
      if (err?.code === 'NOT_FOUND') return null;
      throw err;
    }
    const owner = parseOwnerMeta(meta);
    if (owner === null || owner.name !== name) throw collision(id, owner);
    owners.set(name, owner.runId);
    return owner.runId;
  };

  /** The owner of `name`, recording `runId` as it when nobody has. */
  const register = async (name, runId) => {
    const known = owners.get(name);
    if (known !== undefined) return known;
    const store = await openStore();
    try {
      await store.createRun(ownerLogId(name), ownerMeta(runId, name));
    } catch (err) {
      if (err?.code !== 'EXISTS') throw err;
      return lookup(name);
    }
    owners.set(name, runId);
    for (const wake of waiting) wake();
    return runId;
  };

  /**
   * A promise of `name`'s owner for a write by `runId` (a string or a promise of one), made
   * at call time: the 5.x write methods take it as their run id and apply writes to one
   * name in call order. Its rejection is an SDK error, and handled here too, since the
   * write awaits it only when its turn comes.
   */
  const ownerFor = (name, runId) => {
    const owner = Promise.resolve(runId)
      .then((id) => {
        const err = checkArg('runId', 'string', id) ?? (RUN_ID_RE.test(id) ? null : invalidInput('runId', 'must be 1-128 characters of [A-Za-z0-9_-], not starting with -'));
        if (err !== null) throw err;
        return register(name, id);
      })
      .catch((err) => {
        throw toWorkflowError(err);
      });
    owner.catch(() => {});
    return owner;
  };

  /** The owner of `name`, waiting until there is one; null when the reader or the World is done first. */
  const awaitOwner = async (name, done) => {
    for (;;) {
      const owner = await lookup(name);
      if (owner !== null) return owner;
      if (closed || done()) return null;
      await new Promise((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          waiting.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, OWNER_POLL_MS);
        waiting.add(wake);
      });
      if (closed || done()) return null;
    }
  };

  /** `f()` after the checks: a bad argument rejects with WorkflowWorldError 400, and `f` is not called. */
  const guarded = (checks, f) => {
    const err = firstError(checks);
    return err === null ? f() : Promise.reject(toWorkflowError(err));
  };
  const mapped = async (f) => {
    try {
      return await f();
    } catch (err) {
      throw toWorkflowError(err);
    }
  };
  /** The stream `name` reads from: its owner's, or `runId`'s while it has none (empty and open). */
  const readOwner = async (name, runId) => (await lookup(name)) ?? runId;

  const methods = {
    writeToStream: (name, runId, chunk) =>
      guarded([['name', 'string', name], ['runId', 'stringOrPromise', runId], ['chunk', 'chunk', chunk]], () =>
        streams.write(ownerFor(name, runId), name, chunk),
      ),
    writeToStreamMulti: (name, runId, chunks) =>
      guarded([['name', 'string', name], ['runId', 'stringOrPromise', runId], ['chunks', 'chunks', chunks]], async () => {
        // As the reference: no chunks, nothing recorded.
        if (chunks.length === 0) return;
        await streams.writeMulti(ownerFor(name, runId), name, chunks);
      }),
    closeStream: (name, runId) =>
      guarded([['name', 'string', name], ['runId', 'stringOrPromise', runId]], () => streams.close(ownerFor(name, runId), name)),
    listStreamsByRunId: (runId) => streams.list(runId),
    getStreamChunks: (name, runId, options) =>
      guarded([['name', 'string', name], ['runId', 'string', runId], ['options', 'optionalObject', options]], async () =>
        streams.getChunks(await mapped(() => readOwner(name, runId)), name, options),
      ),
    getStreamInfo: (name, runId) =>
      guarded([['name', 'string', name], ['runId', 'string', runId]], async () =>
        streams.getInfo(await mapped(() => readOwner(name, runId)), name),
      ),
    /**
     * A live reader of stream `name` from `startIndex` (negative: from the end), wherever
     * its owner is; a name nobody has written yet is waited for (polling the index every
     * 100 ms, at once for a write in this process), as the reference waits for its files.
     */
    readFromStream: (name, startIndex) =>
      guarded([['name', 'string', name], ['startIndex', 'optionalInteger', startIndex]], async () => {
        let inner;
        let cancelled = false;
        return new ReadableStream({
          async pull(controller) {
            try {
              if (inner === undefined) {
                const owner = await mapped(() => awaitOwner(name, () => cancelled));
                if (owner === null) {
                  controller.close();
                  return;
                }
                inner = (await streams.get(owner, name, startIndex)).getReader();
              }
              const r = await inner.read();
              if (r.done) controller.close();
              else controller.enqueue(r.value);
            } catch (err) {
              if (!cancelled) controller.error(err);
            }
          },
          async cancel(reason) {
            cancelled = true;
            await inner?.cancel(reason);
          },
        });
      }),
  };

  return {
    methods,
    close() {
      closed = true;
      for (const wake of waiting) wake();
    },
  };
}
