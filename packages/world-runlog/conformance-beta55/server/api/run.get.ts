// GET ?id= → the run as the World stores it (status, specVersion, attributes, whether the
// output is bytes) and, once it ended, its return value or error as the SDK's getRun gives it.
import { getRun } from "workflow/api";
import { getWorld } from "workflow/runtime";
import { defineEventHandler } from "nitro/h3";
import { describeError, json } from "../lib/registry";

export default defineEventHandler(async ({ req }) => {
  const id = new URL(req.url).searchParams.get("id")!;
  const world = await getWorld();
  let run;
  try {
    run = await world.runs.get(id);
  } catch (err) {
    return json({ error: describeError(err) }, 404);
  }
  const body: Record<string, unknown> = {
    runId: run.runId,
    status: run.status,
    workflowName: run.workflowName,
    specVersion: run.specVersion,
    attributes: run.attributes ?? null,
    outputIsBytes: run.output instanceof Uint8Array,
  };
  if (run.status === "completed") body.returnValue = await getRun(id).returnValue;
  if (run.status === "failed") {
    body.error = await getRun(id).returnValue.then(
      () => null,
      (err: unknown) => describeError(err),
    );
  }
  return body;
});
