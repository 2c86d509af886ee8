// A step retried after a RetryableError, a FatalError caught, and one that ends its run.
import { FatalError, getStepMetadata, RetryableError } from "workflow";

async function notYet(tag: string) {
  "use step";
  const { attempt, stepStartedAt } = getStepMetadata();
  if (attempt === 1) throw new RetryableError(`${tag}: not yet`, { retryAfter: "2s" });
  return { attempt, startedAt: stepStartedAt.getTime() };
}

async function refuse(reason: string) {
  "use step";
  throw new FatalError(`refused: ${reason}`);
}

export async function retryThenFatal(tag: string) {
  "use workflow";
  const retried = await notYet(tag);
  let fatal = "";
  try {
    await refuse(`caught in ${tag}`);
  } catch (err) {
    fatal = err instanceof Error ? err.message : String(err);
  }
  return { retried, fatal };
}

export async function fatalEnds(tag: string) {
  "use workflow";
  await refuse(`uncaught in ${tag}`);
  return "unreachable";
}
