// Greedy continuation by llama.cpp (node-llama-cpp 3.21.1, its prebuilt CPU
// binary): the established engine of llama_cpp_greedy_test.py.
//   node llama_cpp_greedy.mjs MODEL.gguf '[prompt token ids]' N
// prints {"tokens": [...]}: up to N greedy tokens after the prompt, fewer when
// llama.cpp stops at an end-of-generation token; {"error": "..."} and exit 3
// when llama.cpp cannot load the file.
import {getLlama} from "node-llama-cpp";

const [modelPath, idsJson, n] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
let model;
try {
  model = await llama.loadModel({modelPath});
} catch (e) {
  console.log(JSON.stringify({error: String(e && e.message ? e.message : e)}));
  process.exit(3);
}
const context = await model.createContext({contextSize: 512, batchSize: 512, threads: 2});
const sequence = context.getSequence();
const tokens = [];
for await (const t of sequence.evaluate(JSON.parse(idsJson), {temperature: 0})) {
  tokens.push(t);
  if (tokens.length >= Number(n)) break;
}
console.log(JSON.stringify({tokens}));
process.exit(0);
