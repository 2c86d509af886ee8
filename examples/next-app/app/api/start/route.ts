// POST {name, token} → starts `demo(name, token)` and `doomed(name)`; → {runId, doomedRunId}
import { start } from "workflow/api";
import { demo, doomed } from "../../../workflows/demo";

export async function POST(req: Request) {
  const { name, token } = (await req.json()) as { name: string; token: string };
  const run = await start(demo, [name, token]);
  const doomedRun = await start(doomed, [name]);
  return Response.json({ runId: run.runId, doomedRunId: doomedRun.runId });
}
