// Drives a running `parallm serve` with the official OpenAI Node SDK:
// completions and chat completions, streamed and not. Greedy (temperature 0)
// streamed text must equal the non-streamed text. Usage: node this.mjs PORT
import OpenAI from "openai";
import assert from "node:assert/strict";

const port = process.argv[2];
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "test-key" });
const models = await client.models.list();
const model = models.data[0].id;

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

await assert.rejects(client.completions.create({ model, prompt: "x", n: 2 }), (e) => e.status === 400);
console.log("openai sdk: ok");
