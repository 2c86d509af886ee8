// POST {name} → starts `sleepy(name)`; → {runId}
import { start } from "workflow/api";
import { defineEventHandler } from "nitro/h3";
import { sleepy } from "../../workflows/sleepy";

export default defineEventHandler(async ({ req }) => {
  const { name } = (await req.json()) as { name: string };
  const run = await start(sleepy, [name]);
  return { runId: run.runId };
});
