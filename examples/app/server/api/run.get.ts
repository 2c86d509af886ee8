// GET ?id=<runId> → {status, returnValue?, error?}
import { getRun } from "workflow/api";
import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(async ({ req }) => {
  const id = new URL(req.url).searchParams.get("id")!;
  const run = getRun(id);
  const status = await run.status;
  if (status === "completed") return { status, returnValue: await run.returnValue };
  if (status === "failed") {
    const error = await run.returnValue.then(
      () => null,
      (err: unknown) => String((err as Error)?.message ?? err),
    );
    return { status, error };
  }
  return { status };
});
