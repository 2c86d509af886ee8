// GET ?token= → the hook the World holds for the token, or 404 with the World's error.
import { getWorld } from "workflow/runtime";
import { defineEventHandler } from "nitro/h3";
import { describeError, json } from "../lib/registry";

export default defineEventHandler(async ({ req }) => {
  const token = new URL(req.url).searchParams.get("token")!;
  const world = await getWorld();
  try {
    const hook = await world.hooks.getByToken(token);
    const until = hook.tokenRetentionUntil;
    return { hookId: hook.hookId, runId: hook.runId, token: hook.token, tokenRetentionUntil: until ? new Date(until).toISOString() : null };
  } catch (err) {
    return json({ error: describeError(err) }, 404);
  }
});
