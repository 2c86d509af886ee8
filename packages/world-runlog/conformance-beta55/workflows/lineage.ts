// Runs started from a workflow body, one and two levels down.
import { start } from "workflow/api";

async function stamp(tag: string) {
  "use step";
  return `${tag}:done`;
}

export async function leaf(tag: string) {
  "use workflow";
  return await stamp(tag);
}

export async function parent(tag: string) {
  "use workflow";
  const child = await start(leaf, [tag]);
  return child.runId;
}

export async function middle(tag: string) {
  "use workflow";
  const child = await start(leaf, [`${tag}/leaf`]);
  return child.runId;
}

export async function grandparent(tag: string) {
  "use workflow";
  const child = await start(middle, [`${tag}/middle`]);
  return child.runId;
}
