// POST {token, data} → resumes the hook; 404 while no hook holds the token yet.
import { resumeHook } from "workflow/api";
import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(async ({ req }) => {
  const { token, data } = (await req.json()) as { token: string; data: unknown };
  try {
    const hook = await resumeHook(token, data);
    return { ok: true, runId: hook.runId };
  } catch (err) {
    return new Response(JSON.stringify({ ok: false, error: String((err as Error)?.message ?? err) }), {
      status: 404,
      headers: { "content-type": "application/json" },
    });
  }
});
