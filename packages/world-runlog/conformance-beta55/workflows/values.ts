// Values through steps: a sum, a string with NUL bytes, and steps run one after another,
// with and without the run's stream.
import { getWorkflowMetadata, getWritable, sleep } from "workflow";

async function sum(a: number, b: number) {
  "use step";
  return a + b;
}

export async function addition(a: number, b: number) {
  "use workflow";
  return await sum(a, b);
}

async function nulString(prefix: string) {
  "use step";
  return `${prefix}\0middle\0`;
}

export async function nulBytes(prefix: string) {
  "use workflow";
  const s = await nulString(prefix);
  return { s, length: s.length };
}

async function triple(n: number) {
  "use step";
  return n * 3;
}

async function minusOne(n: number) {
  "use step";
  return n - 1;
}

// (n * 3 - 1) * 3 - 1, four steps in sequence.
export async function chain(n: number) {
  "use workflow";
  let v = await triple(n);
  v = await minusOne(v);
  v = await triple(v);
  return await minusOne(v);
}

async function say(word: string, last: boolean) {
  "use step";
  const writer = getWritable<string>().getWriter();
  await writer.write(`${word}\n`);
  if (last) await writer.close();
  else writer.releaseLock();
  return word.length;
}

// Three steps each writing one line to the run's stream; the last closes it.
export async function streamed(words: string[]) {
  "use workflow";
  let total = 0;
  for (const [i, w] of words.entries()) total += await say(w, i === words.length - 1);
  return total;
}

async function draw(i: number) {
  "use step";
  // How many times this step's body ran, per run and index: a replay must not run it again.
  const { workflowRunId } = getWorkflowMetadata();
  const g = globalThis as { __conformanceDraws?: Map<string, number> };
  g.__conformanceDraws ??= new Map();
  const key = `${workflowRunId}#${i}`;
  g.__conformanceDraws.set(key, (g.__conformanceDraws.get(key) ?? 0) + 1);
  return Math.random();
}

// Random draws recorded once and replayed: `n` before a sleep (replayed in the second
// invocation) and `n` after.
export async function draws(n: number) {
  "use workflow";
  const values: number[] = [];
  for (let i = 0; i < n; i++) values.push(await draw(i));
  await sleep("1s");
  for (let i = n; i < 2 * n; i++) values.push(await draw(i));
  return values;
}
