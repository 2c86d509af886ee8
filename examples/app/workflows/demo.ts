// One workflow that touches every feature the examples check: three steps writing to the
// run's stream, sleep("1s"), a hook resumed from outside over HTTP, a step that fails on
// its first attempt and is retried, and a step throwing FatalError (caught here; `doomed`
// lets the same error end a second run as failed).
import { createHook, FatalError, getStepMetadata, getWritable, sleep } from "workflow";

// One writable per call: its writer writes the line, then releases the lock, or closes
// the run's stream (the last step) through the same writer, so the close is ordered
// after the write.
async function emit(line: string, { close = false } = {}) {
  const writer = getWritable<Uint8Array>().getWriter();
  await writer.write(new TextEncoder().encode(`${line}\n`));
  if (close) await writer.close();
  else writer.releaseLock();
}

async function prepare(name: string) {
  "use step";
  await emit(`prepare ${name}`);
  return `${name}:prepared`;
}

async function flaky(value: string) {
  "use step";
  const { attempt } = getStepMetadata();
  if (attempt === 1) throw new Error("transient failure on the first attempt");
  await emit(`flaky ${value} attempt ${attempt}`);
  return { value: `${value}:flaky`, attempt };
}

async function refuse(reason: string) {
  "use step";
  throw new FatalError(`refused: ${reason}`);
}

async function finish(value: string, approval: { approved: boolean; note: string }) {
  "use step";
  await emit(`finish ${value} approved=${approval.approved} note=${approval.note}`, { close: true });
  return `${value}:finished`;
}

// `name` is all the stream and the result contain (the same bytes for every run given
// the same name); `token` is the hook's, unique per run.
export async function demo(name: string, token: string) {
  "use workflow";
  const prepared = await prepare(name);
  await sleep("1s");
  const hook = createHook<{ approved: boolean; note: string }>({ token });
  const approval = await hook;
  const retried = await flaky(prepared);
  let fatal = "";
  try {
    await refuse("caught by the workflow");
  } catch (err) {
    fatal = err instanceof Error ? err.message : String(err);
  }
  const finished = await finish(retried.value, approval);
  return { prepared, attempt: retried.attempt, fatal, approval, finished };
}

export async function doomed(name: string) {
  "use workflow";
  await refuse(`uncaught in ${name}`);
  return "unreachable";
}
