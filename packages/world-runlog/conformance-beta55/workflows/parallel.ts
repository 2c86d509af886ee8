// Steps awaited together (Promise.all): with two or more, the runtime commits each step's
// `step_created` and its claim (`step_started` stamped with the invocation's
// ownerMessageId) as born-running pairs in one createBatch, where the World has one.
async function plus(a: number, b: number) {
  "use step";
  return a + b;
}

export async function pair(a: number, b: number) {
  "use workflow";
  const [x, y] = await Promise.all([plus(a, 5), plus(b, 7)]);
  return x * 1000 + y;
}

export async function fanOut(width: number) {
  "use workflow";
  return await Promise.all(Array.from({ length: width }, (_, i) => plus(i, 100)));
}
