// POST {token, data} → resumes the hook; 404 while no hook holds the token yet.
import { resumeHook } from "workflow/api";

export async function POST(req: Request) {
  const { token, data } = (await req.json()) as { token: string; data: unknown };
  try {
    const hook = await resumeHook(token, data);
    return Response.json({ ok: true, runId: hook.runId });
  } catch (err) {
    return Response.json({ ok: false, error: String((err as Error)?.message ?? err) }, { status: 404 });
  }
}
