// The storage's streams (`world.streams` of 5.x): writes to one stream applied in call order,
// chunk pages, and live readers that wait on the addon for more.
import { toWorkflowError } from './errors.js';
import { toJson } from './codec.js';
import { checkArg } from './validate.js';

/** Bytes of a stream chunk (`string` as UTF-8; its type was checked by `checked`). */
const chunkBytes = (chunk) => (typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);

/** How long one `streamsWait` of a live reader blocks before looking again. */
const STREAM_WAIT_MS = 1000;

/**
 * `{ streams, endReaders }`: the stream methods over `call` (storage's `call`: `f(world)` with
 * any rejection mapped to the SDK's class), and what ends their live readers (their streams
 * close).
 */
export function createStreams(call) {
  // Writes to one stream are applied in call order, even when runId is a promise (whose
  // value is type-checked like a runId given as is).
  const tails = new Map();
  const serial = (runId, name, f) => {
    const key = `${name}`;
    const prev = tails.get(key) ?? Promise.resolve();
    const next = prev.catch(() => undefined).then(async () => {
      const id = await runId;
      const err = checkArg('runId', 'string', id);
      if (err !== null) throw toWorkflowError(err);
      return f(id);
    });
    const tail = next.catch(() => undefined);
    tails.set(key, tail);
    tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return next;
  };

  const readers = new Set();

  const streams = {
    write: (runId, name, chunk) =>
      serial(runId, name, (id) => call(async (w) => void (await w.streamsWrite(id, name, chunkBytes(chunk))))),
    writeMulti: (runId, name, chunks) =>
      serial(runId, name, (id) =>
        call(async (w) => {
          if (chunks.length === 0) return;
          await w.streamsWriteMulti(id, name, chunks.map(chunkBytes));
        }),
      ),
    close: (runId, name) => serial(runId, name, (id) => call(async (w) => void (await w.streamsClose(id, name)))),
    list: (runId) => call((w) => w.streamsList(runId)),
    getChunks: (runId, name, options) =>
      call(async (w) => {
        const page = await w.streamsGetChunks(runId, name, toJson(options));
        return {
          data: page.data.map((c) => ({ index: c.index, data: new Uint8Array(c.data.buffer, c.data.byteOffset, c.data.byteLength) })),
          cursor: page.cursor ?? null,
          hasMore: page.hasMore,
          done: page.done,
        };
      }),
    getInfo: (runId, name) => call((w) => w.streamsInfo(runId, name)),
    /** A live reader from `startIndex` (negative: from the end); empty chunks are skipped. */
    get: async (runId, name, startIndex = 0) => {
      const w = await call((w) => w);
      let next = startIndex;
      let cancelled = false;
      const reader = { cancel: () => (cancelled = true) };
      readers.add(reader);
      const finish = () => readers.delete(reader);
      return new ReadableStream({
        async pull(controller) {
          try {
            for (;;) {
              if (cancelled) {
                finish();
                controller.close();
                return;
              }
              const r = await w.streamsRead(runId, name, next, 100);
              next = r.nextIndex;
              const nonEmpty = r.chunks.filter((c) => c.data.byteLength > 0);
              for (const c of nonEmpty) controller.enqueue(new Uint8Array(c.data.buffer, c.data.byteOffset, c.data.byteLength));
              if (r.done) {
                finish();
                controller.close();
                return;
              }
              if (nonEmpty.length > 0) return;
              if (!r.hasMore) await w.streamsWait(runId, name, next, STREAM_WAIT_MS);
            }
          } catch (err) {
            finish();
            if (cancelled || err?.code === 'CLOSED') {
              try {
                controller.close();
              } catch {}
              return;
            }
            controller.error(toWorkflowError(err));
          }
        },
        cancel() {
          cancelled = true;
          finish();
        },
      });
    },
  };
  const endReaders = () => {
    for (const r of readers) r.cancel();
    readers.clear();
  };
  return { streams, endReaders };
}
