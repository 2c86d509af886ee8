// GET → where world-runlog found its addon, from app code that imports the package: unlike
// the World that @workflow/core loads at run time (outside the bundle), this import is
// bundled by Next (Turbopack), native.js and all. Copied into app/api/addon/ by
// examples/next.mjs on the runlog World only (the local World's app has no world-runlog).
import { addonPath, addonSource, version } from "world-runlog/store";

export const dynamic = "force-dynamic";

export function GET() {
  return Response.json({ addonPath, addonSource, version: version() });
}
