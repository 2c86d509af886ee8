// GET ?id=<runId> → the run's default stream, every chunk concatenated (waits for close).
import { getRun } from "workflow/api";
import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(async ({ req }) => {
  const id = new URL(req.url).searchParams.get("id")!;
  const parts: Uint8Array[] = [];
  const encoder = new TextEncoder();
  for await (const chunk of getRun(id).getReadable() as AsyncIterable<unknown>) {
    if (chunk instanceof Uint8Array) parts.push(chunk);
    else parts.push(encoder.encode(typeof chunk === "string" ? chunk : JSON.stringify(chunk)));
  }
  return new Response(Buffer.concat(parts), { headers: { "content-type": "application/octet-stream" } });
});
