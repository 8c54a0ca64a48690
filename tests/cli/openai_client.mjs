// The official OpenAI Node client (npm `openai`) against vouch serve: a completion, a streamed
// completion and a wrong model. argv: DIR (where `openai` is installed) URL EXPECTED_TOKENS.
import { createRequire } from "module";
const [dir, url, expected] = process.argv.slice(2);
const OpenAI = createRequire(dir + "/")("openai");
const client = new OpenAI({ baseURL: url + "/v1", apiKey: "not-a-real-key", maxRetries: 0 });
const ask = { model: "synth:tiny", prompt: [5, 6, 7, 8, 9], max_tokens: 12, temperature: 0, ignore_eos: true };
let failed = 0;
const check = (ok, what) => { if (!ok) { failed++; console.error("FAIL: " + what); } else console.log("ok: " + what); };

const r = await client.completions.create(ask);
check(r.object === "text_completion" && r.model === "synth:tiny", "completion object " + JSON.stringify(r).slice(0, 200));
check(r.choices[0].token_ids.join(" ") === expected, "completion tokens " + r.choices[0].token_ids + " == " + expected);
check(r.choices[0].finish_reason === "length" && r.usage.completion_tokens === 12, "finish and usage");

const stream = await client.completions.create({ ...ask, stream: true });
const toks = [];
let fin = null;
for await (const chunk of stream) {
  for (const c of chunk.choices) { toks.push(...c.token_ids); if (c.finish_reason) fin = c.finish_reason; }
}
check(toks.join(" ") === expected && fin === "length", "streamed tokens " + toks + " finish " + fin);

try {
  await client.completions.create({ ...ask, model: "gpt-4" });
  check(false, "wrong model accepted");
} catch (e) {
  check(e instanceof OpenAI.NotFoundError && e.status === 404 && /does not exist/.test(e.message), "wrong model: " + e);
}
process.exit(failed ? 1 : 0);
