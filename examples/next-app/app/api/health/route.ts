// GET → {ok: true}: the server is up (examples/next.mjs polls it before the run).
export const dynamic = "force-dynamic";

export function GET() {
  return Response.json({ ok: true });
}
