// GET ?id= → the run's default stream as it is written (text chunks), ending at its close.
import { getRun } from "workflow/api";
import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(({ req }) => {
  const id = new URL(req.url).searchParams.get("id")!;
  const encoder = new TextEncoder();
  const bytes = (getRun(id).getReadable() as ReadableStream<unknown>).pipeThrough(
    new TransformStream<unknown, Uint8Array>({
      transform(chunk, out) {
        out.enqueue(chunk instanceof Uint8Array ? chunk : encoder.encode(typeof chunk === "string" ? chunk : JSON.stringify(chunk)));
      },
    }),
  );
  return new Response(bytes, { headers: { "content-type": "text/plain" } });
});
