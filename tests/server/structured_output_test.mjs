// Structured outputs against a running `parallm serve` (structured_output_test.py starts it):
//   node structured_output_test.mjs PORT SCHEMA_DIR LABEL
// Every JSON schema in SCHEMA_DIR is asked for through response_format json_schema (chat), guided_json
// (completions) or structured_outputs.json, with n = 2, and every answer must parse and validate with
// ajv (draft 2020-12, ajv-formats), the standard validator, not this server's compiler. Choice, regex
// and grammar answers must match exactly (JavaScript's RegExp, full match). tool_choice "required" and
// a named function must give tool calls whose arguments validate against the function's parameters.
// The OpenAI SDK's chat.completions.parse must return the parsed object. Bad constraints must be 400s
// naming the problem, and the server must stay healthy.
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const [port, schemaDir, label] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const client = new OpenAI({ apiKey: "none", baseURL: `${base}/v1` });
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
let failures = 0;
const fail = (what) => {
  failures++;
  console.log(`FAIL [${label}] ${what}`);
};
const MAX_TOKENS = 120;

async function post(route, body) {
  const r = await fetch(base + route, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

function check(name, schema, text, finish) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return fail(`${name}: not JSON (finish ${finish}): ${JSON.stringify(text).slice(0, 200)}`);
  }
  const validate = ajv.compile(schema);
  if (!validate(v)) fail(`${name}: ${JSON.stringify(validate.errors).slice(0, 300)} for ${text.slice(0, 200)}`);
}

const files = fs.readdirSync(schemaDir).filter((f) => f.endsWith(".json")).sort();
let answers = 0;
await Promise.all(
  files.map(async (f, k) => {
    const schema = JSON.parse(fs.readFileSync(path.join(schemaDir, f), "utf8"));
    const name = f.replace(/\.json$/, "");
    const way = k % 3;
    let r;
    if (way === 0) {
      r = await post("/v1/chat/completions", {
        messages: [{ role: "user", content: "Answer in JSON." }], n: 2, max_tokens: MAX_TOKENS, temperature: 1, seed: k,
        response_format: { type: "json_schema", json_schema: { name, schema, strict: true } },
      });
    } else if (way === 1) {
      r = await post("/v1/completions", { prompt: "Once upon a time", n: 2, max_tokens: MAX_TOKENS, temperature: 1, seed: k, guided_json: schema });
    } else {
      r = await post("/v1/completions", { prompt: "Once upon a time", n: 2, max_tokens: MAX_TOKENS, temperature: 0.8, seed: k, structured_outputs: { json: schema } });
    }
    if (r.status !== 200) return fail(`${name}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    for (const c of r.body.choices) {
      answers++;
      check(name, schema, way === 0 ? c.message.content : c.text, c.finish_reason);
    }
  }),
);
console.log(`[${label}] ${files.length} schemas, ${answers} answers validated`);

// Streaming: the concatenated deltas validate too.
{
  const schema = JSON.parse(fs.readFileSync(path.join(schemaDir, "invoice.json"), "utf8"));
  const stream = await client.chat.completions.create({
    model: "", messages: [{ role: "user", content: "Invoice?" }], stream: true, max_tokens: MAX_TOKENS,
    response_format: { type: "json_schema", json_schema: { name: "invoice", schema } },
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  check("invoice (stream)", schema, text, "");
}

// Choice, regex and grammar: exact full matches.
for (const [body, re, name] of [
  [{ guided_choice: ["red", "green", "blue", "light blue"] }, /^(red|green|blue|light blue)$/, "guided_choice"],
  [{ structured_outputs: { choice: ["yes", "no"] } }, /^(yes|no)$/, "structured_outputs.choice"],
  [{ guided_regex: "[0-9]{3}-[0-9]{4}" }, /^[0-9]{3}-[0-9]{4}$/, "guided_regex"],
  [{ structured_outputs: { regex: "(cat|dog)s? (sat|ran) [a-z]{1,8}\\." } }, /^(cat|dog)s? (sat|ran) [a-z]{1,8}\.$/, "structured_outputs.regex"],
  [{ guided_grammar: 'root ::= expr\nexpr ::= term (("+" | "*") term){0,3}\nterm ::= [0-9] | "(" expr ")"' }, null, "guided_grammar (GBNF)"],
  [{ structured_outputs: { grammar: 'start: greeting " " NAME "!"\ngreeting: "hello" | "hi"\nNAME: /[A-Z][a-z]{1,6}/' } }, /^(hello|hi) [A-Z][a-z]{1,6}!$/, "structured_outputs.grammar (Lark)"],
]) {
  for (const route of ["/v1/completions", "/v1/chat/completions"]) {
    const req = route.includes("chat") ? { messages: [{ role: "user", content: "Go" }] } : { prompt: "Once upon a time" };
    const r = await post(route, { ...req, ...body, n: 3, max_tokens: 60, temperature: 1 });
    if (r.status !== 200) {
      fail(`${name}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
      continue;
    }
    for (const c of r.body.choices) {
      const text = route.includes("chat") ? c.message.content : c.text;
      // The arithmetic grammar by its own recursive reference: balanced and well-formed.
      const ok = re ? re.test(text) : /^[0-9()+*]+$/.test(text) && (() => {
        let s = text, prev;
        do { prev = s; s = s.replace(/\([0-9](?:[+*][0-9]){0,3}\)/g, "0"); } while (s !== prev);
        return /^[0-9](?:[+*][0-9]){0,3}$/.test(s);
      })();
      if (!ok) fail(`${name} on ${route}: ${JSON.stringify(text)}`);
    }
  }
}

// Tool calls: required and named.
const tools = [
  { type: "function", function: { name: "get_weather", parameters: JSON.parse(fs.readFileSync(path.join(schemaDir, "weather_args.json"), "utf8")) } },
  { type: "function", function: { name: "book_slot", parameters: JSON.parse(fs.readFileSync(path.join(schemaDir, "calendar_slot.json"), "utf8")) } },
];
for (const tool_choice of ["required", { type: "function", function: { name: "book_slot" } }]) {
  const r = await client.chat.completions.create({ model: "", messages: [{ role: "user", content: "Do it" }], tools, tool_choice, n: 2, max_tokens: MAX_TOKENS });
  for (const c of r.choices) {
    const calls = c.message.tool_calls ?? [];
    if (!calls.length) fail(`tool_choice ${JSON.stringify(tool_choice)}: no tool calls: ${JSON.stringify(c.message)}`);
    for (const call of calls) {
      const tool = tools.find((t) => t.function.name === call.function.name);
      if (!tool || (typeof tool_choice === "object" && call.function.name !== "book_slot")) {
        fail(`tool_choice: wrong function ${call.function.name}`);
        continue;
      }
      check(`tool ${call.function.name}`, tool.function.parameters, call.function.arguments, c.finish_reason);
    }
  }
}

// The SDK's parse helper with a plain JSON schema.
{
  const schema = JSON.parse(fs.readFileSync(path.join(schemaDir, "person.json"), "utf8"));
  // openai v4 keeps parse under beta; v5 moved it to chat.completions.
  const completions = client.chat.completions.parse ? client.chat.completions : client.beta.chat.completions;
  const r = await completions.parse({
    model: "", messages: [{ role: "user", content: "Who?" }], max_tokens: MAX_TOKENS,
    response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
  });
  const parsed = r.choices[0].message.parsed;
  if (!parsed || !ajv.compile(schema)(parsed)) fail(`chat.completions.parse: ${JSON.stringify(r.choices[0].message)}`);
}

// Bad input: one 400 each, naming the problem; the server stays healthy.
const huge = { enum: Array.from({ length: 20000 }, (_, i) => `v${i}`) };
for (const [body, word] of [
  [{ guided_regex: "(a)\\1" }, "backreference"],
  [{ guided_regex: "a(?=b)" }, "lookaround"],
  [{ guided_json: { type: "string", minLength: 5, maxLength: 1 } }, "maxLength"],
  [{ guided_json: { enum: [] } }, "accepts no output"],
  [{ guided_json: huge }, "enum"],
  [{ guided_json: { type: "object", patternProperties: { a: {} } } }, "patternProperties"],
  [{ guided_json: "{not json" }, "not valid JSON"],
  [{ guided_grammar: "root ::= a\na ::= a \"x\" | \"y\"" }, "left-recursive"],
  [{ guided_grammar: "root ::= undefined_rule" }, "not defined"],
  [{ guided_choice: [] }, "non-empty"],
  [{ guided_choice: ["a"], guided_regex: "b" }, "use one"],
  [{ structured_outputs: { structural_tag: "x" } }, "structural_tag"],
  [{ guided_whitespace_pattern: " *" }, "guided_whitespace_pattern"],
  [{ response_format: { type: "json_schema", json_schema: { name: "x" } } }, "schema"],
  [{ guided_json: { type: "string", pattern: "x{2000}" } }, "repeats"],
  [{ guided_json: { type: "array", items: { type: "string", maxLength: 9000 }, maxItems: 900 } }, "too large"],
]) {
  const r = await post("/v1/completions", { prompt: "Once", max_tokens: 8, ...body });
  const msg = r.body?.error?.message ?? "";
  if (r.status !== 400 || !msg.includes(word)) fail(`bad input ${JSON.stringify(body).slice(0, 80)}: ${r.status} ${msg}`);
}
{
  const r = await post("/v1/chat/completions", { messages: [{ role: "user", content: "x" }], tools, tool_choice: { type: "function", function: { name: "nope" } } });
  if (r.status !== 400 || !r.body.error.message.includes("nope")) fail(`named unknown tool: ${r.status}`);
}
const h = await fetch(base + "/health");
if (h.status !== 200) fail(`/health ${h.status} after the bad requests`);

console.log(failures ? `[${label}] ${failures} failures` : `[${label}] all structured-output checks passed`);
process.exit(failures ? 1 : 0);
