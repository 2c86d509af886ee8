// Starts the World once the server is up: `world.start()` is where a World recovers the
// runs it holds as active (re-enqueues them), which is what lets a run that was asleep when
// the server died complete after a restart. Nitro runs no World's start() by itself.
import { definePlugin } from "nitro";
import { getWorld } from "workflow/runtime";

export default definePlugin(() => {
  Promise.resolve()
    .then(() => getWorld())
    .then((world) => world.start?.())
    .then(
      () => console.log("[example] world.start() done"),
      (err: unknown) => console.error("[example] world.start() failed:", err),
    );
});
