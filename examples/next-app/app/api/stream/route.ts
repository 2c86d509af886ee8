// GET ?id=<runId> → the run's default stream, every chunk concatenated (waits for close).
import { getRun } from "workflow/api";

export const dynamic = "force-dynamic";

export async function GET(req: Request) {
  const id = new URL(req.url).searchParams.get("id")!;
  const parts: Uint8Array[] = [];
  const encoder = new TextEncoder();
  const reader = getRun(id).getReadable().getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (value instanceof Uint8Array) parts.push(value);
    else parts.push(encoder.encode(typeof value === "string" ? value : JSON.stringify(value)));
  }
  return new Response(new Uint8Array(Buffer.concat(parts)), { headers: { "content-type": "application/octet-stream" } });
}
