// POST {workflow, args} → {runId}; POST {workflow, argsList} → {runIds} (all started at once).
import { start } from "workflow/api";
import { defineEventHandler } from "nitro/h3";
import { describeError, json, workflows } from "../lib/registry";

export default defineEventHandler(async ({ req }) => {
  const { workflow, args, argsList } = (await req.json()) as { workflow: string; args?: unknown[]; argsList?: unknown[][] };
  const fn = workflows[workflow];
  if (!fn) return json({ error: { message: `no workflow ${workflow}` } }, 404);
  try {
    if (argsList) {
      const runs = await Promise.all(argsList.map((a) => start(fn, a)));
      return { runIds: runs.map((r) => r.runId) };
    }
    const run = await start(fn, args ?? []);
    return { runId: run.runId };
  } catch (err) {
    return json({ error: describeError(err) }, 500);
  }
});
