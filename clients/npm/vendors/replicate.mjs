// Replicate's official client (replicate) makes the calls Genway's
// Replicate adapter makes: predictions.create (by model "owner/name", or
// by version), then predictions.get until the prediction is terminal. The
// value read is the statuses in order and the final prediction.
import Replicate from "replicate";
import { maxPolls, pause, run } from "./contract.mjs";

const terminal = ["succeeded", "failed", "canceled"];

await run(async ({ base, key, args }) => {
  const replicate = new Replicate({ auth: key, baseUrl: base + "/v1" });
  let p = await replicate.predictions.create(args.request);
  const statuses = [p.status];
  for (let i = 0; !terminal.includes(p.status) && i < maxPolls; i++) {
    await pause(5);
    p = await replicate.predictions.get(p.id);
    statuses.push(p.status);
  }
  return { id: p.id, statuses, output: p.output ?? null, error: p.error ?? null };
});
