// Sleep, suspensions holding several waits (or a wait and a step), and steps given an
// AbortSignal.
import { sleep } from "workflow";

async function plus(a: number, b: number) {
  "use step";
  return a + b;
}

export async function napThenAdd(a: number, b: number) {
  "use workflow";
  await sleep("1s");
  return await plus(a, b);
}

async function checkSignal(i: number, signal: AbortSignal) {
  "use step";
  return signal.aborted ? -1 : i;
}

export async function withSignal(count: number) {
  "use workflow";
  const controller = new AbortController();
  let total = 0;
  for (let i = 1; i <= count; i++) total += await checkSignal(i, controller.signal);
  return total;
}

// Two sleeps in one suspension: a fan-out of waits only.
export async function twoNaps(tag: string) {
  "use workflow";
  await Promise.all([sleep("1s"), sleep("2s")]);
  return `${tag}:rested`;
}

// One step and a sleep in one suspension.
export async function stepBesideNap(a: number) {
  "use workflow";
  const [v] = await Promise.all([plus(a, 1), sleep("1s")]);
  return v;
}
