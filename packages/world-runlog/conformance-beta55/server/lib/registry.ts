// Every workflow the suite starts, by the name the tests use.
import * as failures from "../../workflows/failures";
import * as hooks from "../../workflows/hooks";
import * as lineage from "../../workflows/lineage";
import * as parallel from "../../workflows/parallel";
import * as timing from "../../workflows/timing";
import * as values from "../../workflows/values";

export const workflows: Record<string, (...args: any[]) => Promise<unknown>> = {
  ...values,
  ...timing,
  ...failures,
  ...hooks,
  ...lineage,
  ...parallel,
};

/** Flow-handler invocations per run id, counted by middleware/flow-invocations.ts. */
export function flowInvocations(): Map<string, number> {
  const g = globalThis as { __conformanceFlowInvocations?: Map<string, number> };
  g.__conformanceFlowInvocations ??= new Map();
  return g.__conformanceFlowInvocations;
}

export function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/** A thrown value as {name, message, status?, code?} for a JSON answer. */
export function describeError(err: unknown) {
  const e = err as { name?: string; message?: string; status?: number; code?: string };
  return { name: e?.name ?? "Error", message: String(e?.message ?? err), status: e?.status, code: e?.code };
}
