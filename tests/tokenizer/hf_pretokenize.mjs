// Pre-tokenizer pieces and token ids from Hugging Face's own `tokenizers`
// (the Rust library, npm package `tokenizers`, run with node): the reference
// for tokenizer.json pre_tokenizer configurations, Oniguruma regexes
// included. Reads a JSON array of {"tokenizer": <tokenizer.json>, "texts":
// [...]} and prints, for each entry, one {"pieces", "ids"} per text (pieces
// as the pre-tokenizer leaves them, ids without added special tokens).
//
// usage: node hf_pretokenize.mjs NPM_DIR REQUEST.json
import fs from 'fs';
import { createRequire } from 'module';

const [npmDir, requestPath] = process.argv.slice(2);
const require = createRequire(`${npmDir}/package.json`);
const { Tokenizer } = require('tokenizers');
const request = JSON.parse(fs.readFileSync(requestPath, 'utf8'));
const out = [];
for (const entry of request) {
  const tokenizer = Tokenizer.fromString(JSON.stringify(entry.tokenizer));
  const pre = tokenizer.getPreTokenizer();
  const results = [];
  for (const text of entry.texts) {
    const pieces = pre ? pre.preTokenizeString(text).map(([piece]) => piece) : [text];
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
    results.push({ pieces, ids: encoding.getIds() });
  }
  out.push(results);
}
process.stdout.write(JSON.stringify(out));
