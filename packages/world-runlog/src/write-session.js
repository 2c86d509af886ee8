// `streams.createWriteSession` of the 5.0.0-beta.55 line (@workflow/world 5.0.0-beta.37's
// `StreamWriteSession`): one stateful writer lifetime per in-memory WritableStream of the
// runtime (core creates at most one per stream and otherwise uses the stateless
// write/writeMulti/close). world-local 5.0.0-beta.46 has none; the behaviour followed is the
// interface's and world-vercel's v1 session: `writerId` must be `wrtr_<ULID>`; `chunkSeq`
// is the writer-local position of the group's first chunk, checked to be a non-negative
// integer and observed, not enforced (a repeated or discontinuous `chunkSeq` appends its
// chunks again, as v1 does); requests are applied one at a time in call order; `close()`
// closes the stream after every earlier write is durable; a failed request poisons the
// session (every later `write`/`close` rejects with that error, as core's sink treats it);
// `dispose()` releases nothing, since a session here holds no transport.
//
// Each group is one `streams.writeMulti` of runlog's streams (one atomic append), so what
// a session writes is what the same groups written through `writeMulti` give, byte for
// byte and chunk for chunk (test/beta55-interface-parity.test.mjs compares both with
// world-local's stateless writes).
import { toWorkflowError } from './errors.js';
import { checkArg, invalidInput } from './validate.js';

/** `StreamWriterIdSchema` of world-vercel 5.0.0-beta.37: `wrtr_` and a ULID. */
const WRITER_ID = /^wrtr_[0-9A-HJKMNP-TV-Z]{26}$/;

/** The INVALID_INPUT error (as `WorkflowWorldError` 400) for what is wrong with `args`, or null. */
function badSessionArgs(runId, name, options) {
  const bad = checkArg('runId', 'string', runId) ?? checkArg('name', 'string', name) ?? checkArg('options', 'object', options);
  if (bad !== null) return bad;
  if (typeof options.writerId !== 'string' || !WRITER_ID.test(options.writerId)) {
    return invalidInput('options.writerId', 'must be wrtr_ followed by a ULID');
  }
  return null;
}

/**
 * `streams.createWriteSession` over `streams` (storage.js's checked `writeMulti` and
 * `close`). Throws (synchronously, as a `StreamWriteSession` is returned as is)
 * `WorkflowWorldError` 400 `INVALID_INPUT` for a bad `runId`, `name` or `writerId`.
 */
export function writeSessionFactory(streams) {
  return (runId, name, options) => {
    const bad = badSessionArgs(runId, name, options);
    if (bad !== null) throw toWorkflowError(bad);
    let tail = Promise.resolve();
    let poison;
    /** Runs `f` after every earlier request; a failure poisons the session. */
    const serial = (f) => {
      const next = tail.then(async () => {
        if (poison !== undefined) throw poison;
        try {
          return await f();
        } catch (err) {
          poison = err;
          throw err;
        }
      });
      tail = next.catch(() => undefined);
      return next;
    };
    return {
      writerId: options.writerId,
      write(chunkSeq, chunks) {
        const bad =
          (Number.isSafeInteger(chunkSeq) && chunkSeq >= 0 ? null : invalidInput('chunkSeq', 'must be a non-negative integer')) ??
          checkArg('chunks', 'chunks', chunks);
        if (bad !== null) return Promise.reject(toWorkflowError(bad));
        const group = [...chunks];
        return serial(() => streams.writeMulti(runId, name, group));
      },
      close() {
        return serial(() => streams.close(runId, name));
      },
      dispose() {},
    };
  };
}
