// GET ?id= → how many times the queue delivered the run to the flow handler.
import { defineEventHandler } from "nitro/h3";
import { flowInvocations } from "../lib/registry";

export default defineEventHandler(({ req }) => {
  const id = new URL(req.url).searchParams.get("id")!;
  return { count: flowInvocations().get(id) ?? 0 };
});
