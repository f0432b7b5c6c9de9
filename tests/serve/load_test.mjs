// A bounded load test of zinc serve on loopback: CONCURRENCY streaming chat
// requests at a time, TOTAL in all. Every response must be a complete,
// well-formed event stream (JSON chunks, a finish_reason, usage, [DONE]) with
// no error, and the server's resident memory must stay flat after the
// warm-up. Prints requests/s and the aggregate generated tok/s.
// Usage: node load_test.mjs BASE_URL API_KEY SERVER_PID [TOTAL] [CONCURRENCY]
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const [base, key, pid, totalArg, concArg] = process.argv.slice(2);
const total = Number(totalArg || 500), concurrency = Number(concArg || 64), warmup = Math.min(100, total / 4);
const rssKiB = () => Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+)/m)[1]);
const prompts = ["Hi", "Tell me", "2+2=", "Colours:", "Why"];

// Every fourth request is a chat (its template makes the prompt ~4x longer,
// and prefill on llvmpipe is what bounds this test's time), the rest
// completions.
async function one(i) {
  const chat = i % 4 === 0, text = prompts[i % prompts.length] + " " + i;
  const r = await fetch(base + (chat ? "/v1/chat/completions" : "/v1/completions"), {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + key },
    body: JSON.stringify({
      ...(chat ? { messages: [{ role: "user", content: text }] } : { prompt: text }),
      max_tokens: 4 + (i % 5), temperature: 0.7, seed: i, stream: true, stream_options: { include_usage: true },
    }),
  });
  const body = await r.text();
  assert.equal(r.status, 200, `request ${i}: status ${r.status}: ${body}`);
  const events = body.split("\n\n");
  assert.equal(events.pop(), "", `request ${i}: does not end with a blank line`);
  assert.equal(events.pop(), "data: [DONE]", `request ${i}: no [DONE]`);
  let finish = null, usage = null;
  for (const ev of events) {
    assert.ok(ev.startsWith("data: "), `request ${i}: ${ev}`);
    const chunk = JSON.parse(ev.slice(6));
    assert.ok(!chunk.error, `request ${i}: ${ev}`);
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length && chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.ok(finish === "length" || finish === "stop", `request ${i}: finish ${finish}`);
  assert.ok(usage && usage.completion_tokens <= 4 + (i % 5), `request ${i}: usage ${JSON.stringify(usage)}`);
  return usage.completion_tokens;
}

let next = 0, done = 0, tokens = 0, rssWarm = 0, t0 = 0, tokensWarm = 0;
const start = Date.now();
async function worker() {
  while (next < total) {
    const i = next++;
    const n = await one(i);
    tokens += n;
    if (++done === warmup) {
      rssWarm = rssKiB();
      t0 = Date.now();
      tokensWarm = tokens;
    }
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
const secs = (Date.now() - t0) / 1000, rssEnd = rssKiB();
console.log(`load_test: ${total} streaming requests, ${concurrency} at a time, all complete and well-formed ` +
  `in ${((Date.now() - start) / 1000).toFixed(1)} s`);
console.log(`load_test: after the warm-up of ${warmup}: ${((total - warmup) / secs).toFixed(1)} requests/s, ` +
  `${((tokens - tokensWarm) / secs).toFixed(1)} generated tok/s (all slots)`);
console.log(`load_test: server RSS ${(rssWarm / 1024).toFixed(1)} MiB after the warm-up, ` +
  `${(rssEnd / 1024).toFixed(1)} MiB at the end`);
assert.ok(rssEnd - rssWarm < 16 * 1024, `RSS grew by ${((rssEnd - rssWarm) / 1024).toFixed(1)} MiB after the warm-up`);
