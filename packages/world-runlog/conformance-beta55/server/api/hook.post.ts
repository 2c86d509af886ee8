// POST {token, payload} → resumes the hook holding the token; 404 while none does.
import { resumeHook } from "workflow/api";
import { defineEventHandler } from "nitro/h3";
import { describeError, json } from "../lib/registry";

export default defineEventHandler(async ({ req }) => {
  const { token, payload } = (await req.json()) as { token: string; payload: unknown };
  try {
    const hook = await resumeHook(token, payload);
    return { runId: hook.runId, hookId: hook.hookId };
  } catch (err) {
    return json({ error: describeError(err) }, 404);
  }
});
