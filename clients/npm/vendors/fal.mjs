// fal's official client (@fal-ai/client) makes the calls Genway's fal
// adapter makes: queue.submit, queue.status until COMPLETED, and
// queue.result. The client's requests to https://queue.fal.run are sent
// to the fake's base instead (a requestMiddleware, the client's own hook
// for proxies). The value read is the statuses in order and the result.
import { createFalClient } from "@fal-ai/client";
import { maxPolls, pause, run } from "./contract.mjs";

const queueHost = "https://queue.fal.run";

await run(async ({ base, key, args }) => {
  const fal = createFalClient({
    credentials: key,
    requestMiddleware: async (req) => ({ ...req, url: req.url.startsWith(queueHost) ? base + req.url.slice(queueHost.length) : req.url }),
  });
  const { endpoint, input } = args;
  const queued = await fal.queue.submit(endpoint, { input });
  const statuses = [];
  for (let i = 0; i < maxPolls; i++) {
    const st = await fal.queue.status(endpoint, { requestId: queued.request_id });
    statuses.push(st.status);
    if (st.status === "COMPLETED") break;
    await pause(5);
  }
  const result = await fal.queue.result(endpoint, { requestId: queued.request_id });
  return { requestId: queued.request_id, statuses, data: result.data };
});
