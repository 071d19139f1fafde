// The node peer of the cancellation benchmarks: a sleep of setTimeout (timers/promises)
// with an AbortSignal, aborted by its AbortController; the waiter resumes after the
// rejection. Prints one JSON line: every sample in ns (process.hrtime.bigint()).
// Usage: node peer_node.mjs SAMPLES
import { setTimeout as sleep } from "node:timers/promises";

const samples = Number(process.argv[2] ?? "250");
const out = [];
for (let i = 0; i < samples + 20; i++) {
  const controller = new AbortController();
  let t1 = 0n;
  const waiter = (async () => {
    try {
      await sleep(60_000, undefined, { signal: controller.signal });
    } catch {
      t1 = process.hrtime.bigint();
    }
  })();
  await new Promise((resolve) => setImmediate(resolve)); // the waiter is in its sleep
  const t0 = process.hrtime.bigint();
  controller.abort();
  await waiter;
  if (i >= 20) out.push(Number(t1 - t0));
}
process.stdout.write(JSON.stringify(out) + "\n");
