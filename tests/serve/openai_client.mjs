// zinc serve as the official `openai` npm client sees it: chat and completion,
// plain and streaming, two requests at once, and the client's own error type
// for a refused request. Usage: node openai_client.mjs BASE_URL MODEL API_KEY
import assert from "node:assert/strict";
import OpenAI from "openai";

const [base, model, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0, timeout: 120000 });
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Name a colour." },
];

async function step(name, fn) {
  const t0 = Date.now();
  await fn();
  console.log(`openai_client: ${name} ok (${Date.now() - t0} ms)`);
}

await step("models.list", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
});

let plain;
await step("chat.completions.create", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  plain = r;
});

await step("chat.completions.create stream", async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = "", finish = null, chunks = 0, usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    chunks++;
    text += chunk.choices[0].delta.content ?? "";
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.equal(text, plain.choices[0].message.content, "streamed text differs from the plain reply");
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.ok(chunks >= 2, `only ${chunks} chunks`);
  assert.equal(usage.completion_tokens, plain.usage.completion_tokens);
});

await step("completions.create (plain and stream)", async () => {
  const args = { model, prompt: "The capital of France is", max_tokens: 8, temperature: 0, seed: 5 };
  const r = await client.completions.create(args);
  assert.equal(r.object, "text_completion");
  const stream = await client.completions.create({ ...args, stream: true });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
  assert.equal(text, r.choices[0].text);
});

await step("two streams at once", async () => {
  const one = (content, seed) =>
    client.chat.completions
      .create({ model, messages: [{ role: "user", content }], max_tokens: 16, temperature: 0.8, seed, stream: true })
      .then(async (s) => {
        let t = "";
        for await (const c of s) t += c.choices[0]?.delta?.content ?? "";
        return t;
      });
  const alone = [await one("first", 1), await one("second", 2)];
  const together = await Promise.all([one("first", 1), one("second", 2)]);
  assert.deepEqual(together, alone, "seeded streams differ when they run together");
});

await step("errors", async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages: [], max_tokens: 4 }),
    (e) => e instanceof OpenAI.BadRequestError && /'messages' is empty/.test(e.message),
  );
  await assert.rejects(
    client.chat.completions.create({ model: "no-such-model", messages, max_tokens: 4 }),
    (e) => e instanceof OpenAI.AuthenticationError && /not served here/.test(e.message),
  );
  const wrong = new OpenAI({ baseURL: base + "/v1", apiKey: "wrong-key", maxRetries: 0 });
  await assert.rejects(
    wrong.chat.completions.create({ model, messages, max_tokens: 2 }),
    (e) => e instanceof OpenAI.AuthenticationError && /API key/.test(e.message),
  );
});

console.log("openai_client: all passed");
