// GET ?id= → how many times each `draw` step body of the run ran, by index.
import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(({ req }) => {
  const id = new URL(req.url).searchParams.get("id")!;
  const counts = (globalThis as { __conformanceDraws?: Map<string, number> }).__conformanceDraws ?? new Map();
  const byIndex: Record<string, number> = {};
  for (const [key, n] of counts) if (key.startsWith(`${id}#`)) byIndex[key.slice(id.length + 1)] = n;
  return { byIndex };
});
