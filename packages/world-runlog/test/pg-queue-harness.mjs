// The PostgreSQL queue (src/queue-postgres.js) behind a real HTTP route: world-local's
// createQueueHandler on a loopback port, answering each delivery with what `onDelivery`
// returns (a promise of it; `{ timeoutSeconds }` asks for a later redelivery). Shared by
// test/pg-queue.test.mjs and its child servers (test/fixtures/pg-queue-server.mjs).
import { createServer } from 'node:http';

import { createLocalWorld } from '@workflow/world-local';

import { createPostgresQueue } from '../src/queue-postgres.js';

/** `{ queue, port, close() }`: a started PostgreSQL queue delivering to its own server. */
export async function startQueueServer({ url, schema, onDelivery, sweepIntervalMs = 500, detectPort = false }) {
  const local = createLocalWorld({ recoverActiveRuns: false });
  const handler = local.createQueueHandler('__wkf_workflow_', async (body, meta) => onDelivery({ attempt: meta.attempt, messageId: meta.messageId, body, at: Date.now() }));
  const http = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const response = await handler(
      new Request(`http://localhost${req.url}`, { method: 'POST', headers: req.headers, body: Buffer.concat(chunks) }),
    );
    res.writeHead(response.status, { 'content-type': 'application/json' });
    res.end(await response.text());
  });
  await new Promise((r) => http.listen(0, '127.0.0.1', r));
  const port = http.address().port;
  // detectPort: no target given, the queue finds the port this process listens on.
  const queue = createPostgresQueue({ url, schema, concurrency: 4, target: detectPort ? {} : { port }, local, sweepIntervalMs });
  await queue.start();
  return {
    queue,
    port,
    async close() {
      await queue.close();
      await local.close();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    },
  };
}
