// GET → what the configured World declares: spec version, capabilities, optional members.
import { getWorld } from "workflow/runtime";
import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(async () => {
  const world = (await getWorld()) as any;
  return {
    specVersion: world.specVersion ?? null,
    capabilities: world.capabilities ?? null,
    createBatch: typeof world.events?.createBatch === "function",
    getMany: typeof world.runs?.getMany === "function",
    waitForTerminalStatus: typeof world.runs?.waitForTerminalStatus === "function",
  };
});
