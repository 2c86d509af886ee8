// Hooks: payloads collected until one says done, and a second claim of a held token.
import { createHook, getWritable } from "workflow";

async function announce(line: string) {
  "use step";
  const writer = getWritable<string>().getWriter();
  await writer.write(`${line}\n`);
  writer.releaseLock();
}

type Note = { text: string; done?: boolean };

export async function collect(token: string, label: string) {
  "use workflow";
  const hook = createHook<Note>({ token, metadata: { label } });
  await announce("listening");
  const notes: Note[] = [];
  for await (const note of hook) {
    notes.push(note);
    if (note.done) break;
  }
  return { label, notes };
}

// Returns the run holding `token` if another run has it, else the first payload.
export async function claim(token: string) {
  "use workflow";
  const hook = createHook<Note>({ token });
  const holder = await hook.getConflict();
  if (holder) return { heldBy: holder.runId };
  const note = await hook;
  return { note };
}

async function slow(n: number) {
  "use step";
  await new Promise((r) => setTimeout(r, 150));
  return n;
}

// Steps run while payloads for the hook arrive from outside (out-of-band writes racing
// the run's own), until three are in.
export async function racer(token: string) {
  "use workflow";
  const hook = createHook<Note>({ token });
  const before = await slow(1);
  const texts: string[] = [];
  for await (const note of hook) {
    texts.push(note.text);
    if (texts.length === 3) break;
  }
  const after = await slow(2);
  return { before, after, texts };
}

// A hook kept by minimum retention (capabilities.hookRetention): it takes one payload, and
// outlives the run for an hour, still holding its token.
export async function retained(token: string) {
  "use workflow";
  const hook = createHook<Note>({ token, experimental_minRetention: "1h" });
  const note = await hook;
  return { note };
}
