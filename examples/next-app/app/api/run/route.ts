// GET ?id=<runId> → {status, returnValue?, error?}
import { getRun } from "workflow/api";

export const dynamic = "force-dynamic";

export async function GET(req: Request) {
  const id = new URL(req.url).searchParams.get("id")!;
  const run = getRun(id);
  const status = await run.status;
  if (status === "completed") return Response.json({ status, returnValue: await run.returnValue });
  if (status === "failed") {
    const error = await run.returnValue.then(
      () => null,
      (err: unknown) => String((err as Error)?.message ?? err),
    );
    return Response.json({ status, error });
  }
  return Response.json({ status });
}
