// Reference token ids from transformers.js (the @lenml/tokenizers fork of
// Hugging Face's JavaScript tokenizers), an implementation independent of
// parallm's. Prints one JSON array: for each text of the corpus, its ids
// with and without the special tokens the tokenizer adds.
//
// usage: node hf_reference.mjs NPM_DIR FAMILY CORPUS.json
import fs from 'fs';
import { createRequire } from 'module';

const [npmDir, family, corpusPath] = process.argv.slice(2);
const require = createRequire(`${npmDir}/package.json`);
const tokenizer = require(`@lenml/tokenizer-${family}`).fromPreTrained();
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
const out = corpus.map((text) => ({
  with: tokenizer.encode(text, { add_special_tokens: true }),
  without: tokenizer.encode(text, { add_special_tokens: false }),
}));
process.stdout.write(JSON.stringify(out));
