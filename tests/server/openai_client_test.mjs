// Drives a running `parallm serve` with the official OpenAI Node SDK:
// completions and chat completions, streamed and not. Greedy (temperature 0)
// streamed text must equal the non-streamed text; n choices repeat with the
// same seed; greedy logprobs put the chosen token first; embeddings, float
// and the SDK's default base64. Usage: node this.mjs PORT
import OpenAI from "openai";
import assert from "node:assert/strict";

const port = process.argv[2];
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "test-key" });
const models = await client.models.list();
const model = models.data[0].id;
assert.equal((await client.models.retrieve(model)).id, model);

const c = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12, temperature: 0 });
assert.equal(c.object, "text_completion");
assert.equal(c.usage.completion_tokens, c.choices[0].finish_reason === "length" ? 12 : c.usage.completion_tokens);
let streamed = "";
for await (const chunk of await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12, temperature: 0, stream: true })) {
  streamed += chunk.choices[0]?.text ?? "";
}
assert.equal(streamed, c.choices[0].text);

const messages = [{ role: "user", content: "Tell me a story." }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0 });
assert.equal(chat.choices[0].message.role, "assistant");
let chatStreamed = "";
let usage = null;
for await (const chunk of await client.chat.completions.create({
  model, messages, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } })) {
  chatStreamed += chunk.choices[0]?.delta?.content ?? "";
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(chatStreamed, chat.choices[0].message.content);
assert.deepEqual(usage, chat.usage);

const several = { model, prompt: "Once upon a time", max_tokens: 8, n: 3, seed: 42, temperature: 1 };
const multi = await client.completions.create(several);
assert.deepEqual(multi.choices.map((x) => x.index), [0, 1, 2]);
const again = await client.completions.create(several);
assert.deepEqual(again.choices.map((x) => x.text), multi.choices.map((x) => x.text));

const withLogprobs = await client.chat.completions.create({
  model, messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
const content = withLogprobs.choices[0].logprobs.content;
assert.equal(content.length, withLogprobs.usage.completion_tokens);
for (const t of content) {
  assert.equal(t.top_logprobs.length, 3);
  assert.equal(t.top_logprobs[0].token, t.token);  // greedy: the most likely token
  assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6);
  assert.ok(t.logprob <= 0 && t.top_logprobs[2].logprob <= t.top_logprobs[1].logprob);
}
assert.equal(Buffer.from(content.flatMap((t) => t.bytes)).toString("utf8"), withLogprobs.choices[0].message.content);

// Tools as the SDK sends them are accepted (this model's template ignores them: the answer is text).
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }, strict: false } }];
const withTools = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, tools, tool_choice: "auto" });
assert.equal(typeof withTools.choices[0].message.content, "string");

// Scoring a text (as evaluation harnesses do): echo with logprobs gives every prompt token's logprob.
const scored = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 1, temperature: 0, echo: true, logprobs: 1 });
const slp = scored.choices[0].logprobs;
assert.equal(slp.tokens.length, scored.usage.prompt_tokens + 1);
assert.equal(slp.token_logprobs[0], null);
assert.ok(slp.token_logprobs.slice(1).every((x) => x <= 0));

await assert.rejects(client.completions.create({ model, prompt: "x", logprobs: 21 }), (e) => e.status === 400);

// Embeddings. With no encoding_format the SDK asks for base64 and decodes it
// as little-endian float32 itself: it must give the float answer's values
// exactly. Bit-for-bit holds for one input a request on an idle server (its
// rows are the step's only rows). A request's several inputs share a step or
// not, as the engine's wake-ups fall, and another batch shape sums the
// matmuls in another order: between such requests values agree to ~1e-5 (as
// in vLLM), so there the check is a tolerance.
const inputs = ["Once upon a time", "The little dog was very happy"];
const asFloat = await client.embeddings.create({ model, input: inputs, encoding_format: "float" });
const viaBase64 = await client.embeddings.create({ model, input: inputs });
assert.equal(asFloat.object, "list");
assert.equal(asFloat.data.length, 2);
assert.equal(asFloat.usage.total_tokens, asFloat.usage.prompt_tokens);
for (let i = 0; i < 2; ++i) {
  const f = asFloat.data[i].embedding;
  assert.equal(asFloat.data[i].index, i);
  assert.ok(f.length > 0 && typeof f[0] === "number");
  assert.ok(Math.abs(f.reduce((a, x) => a + x * x, 0) - 1) < 1e-5);  // L2-normalised
  const b = Array.from(viaBase64.data[i].embedding);
  assert.equal(b.length, f.length);
  const worst = Math.max(...b.map((x, j) => Math.abs(x - f[j])));
  assert.ok(worst < 1e-3, `input ${i}: base64 and float embeddings differ by ${worst}`);
}
const oneFloat = await client.embeddings.create({ model, input: inputs[1], encoding_format: "float" });
const oneBase64 = await client.embeddings.create({ model, input: inputs[1] });
assert.deepEqual(Array.from(oneBase64.data[0].embedding), oneFloat.data[0].embedding.map(Math.fround));
const explicit = await client.embeddings.create({ model, input: inputs[1], encoding_format: "base64" });
assert.equal(typeof explicit.data[0].embedding, "string");  // asked for: returned as sent
const raw = Buffer.from(explicit.data[0].embedding, "base64");
const le = Array.from({ length: raw.length / 4 }, (_, i) => raw.readFloatLE(4 * i));
assert.deepEqual(le, oneFloat.data[0].embedding.map(Math.fround));
const dims = asFloat.data[0].embedding.length;
await client.embeddings.create({ model, input: inputs[0], dimensions: dims });
await assert.rejects(client.embeddings.create({ model, input: inputs[0], dimensions: dims - 1 }), (e) => e.status === 400);
await assert.rejects(client.embeddings.create({ model, input: "" }), (e) => e.status === 400);
console.log("openai sdk: ok");
