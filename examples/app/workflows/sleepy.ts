// A workflow that spends most of its time asleep, for the restart test of examples/run.mjs
// (--restart-mid-sleep): the server is killed while the run sleeps and started again on the
// same data directory, and the run must still complete with this result. It writes no
// stream, so the `demo` run's stream bytes are untouched by it.
import { sleep } from "workflow";

async function before(name: string) {
  "use step";
  return `${name}:before`;
}

async function after(value: string) {
  "use step";
  return `${value}:after`;
}

// `sleepMs`: how long it sleeps (4 s unless run.mjs --restart-sleep-ms says otherwise).
export async function sleepy(name: string, sleepMs: number) {
  "use workflow";
  const b = await before(name);
  await sleep(sleepMs);
  const a = await after(b);
  return { before: b, after: a };
}
