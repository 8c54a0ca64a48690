// The checks of tests/cli/test_llamacpp_server.sh against scripts/peers/llamacpp/server.mjs:
//   node llamacpp_server_checks.mjs F32_URL F32_TWIN_URL Q4_URL KEYED_URL KEY
// F32_URL and F32_TWIN_URL serve the same f32 GGUF (A/A), Q4_URL its q4_0 export, KEYED_URL the
// f32 GGUF behind an API key. Prints "FAIL: ..." per failed check and "N passed, M failed";
// exits 1 when any check failed.
const [A, A2, Q, KEYED, KEY] = process.argv.slice(2);
let pass = 0, fail = 0;
const ok = (cond, what, detail = "") => {
  if (cond) pass++;
  else { fail++; console.log(`FAIL: ${what}${detail ? ": " + detail : ""}`); }
  return cond;
};
const short = (x) => JSON.stringify(x)?.slice(0, 300);

async function post(base, path, body, headers = {}) {
  const r = await fetch(base + path, { method: "POST", headers: { "Content-Type": "application/json", ...headers },
                                       body: typeof body === "string" ? body : JSON.stringify(body) });
  const text = await r.text();
  let j = null;
  try { j = JSON.parse(text); } catch { /* SSE or not JSON */ }
  return { status: r.status, j, text };
}
const cmpl = async (body, base = A) => post(base, "/v1/completions", body);
const chat = async (body, base = A) => post(base, "/v1/chat/completions", body);
// a streamed request: its events (parsed), in order; the last must be [DONE]
async function stream(path, body, base = A) {
  const r = await post(base, path, { ...body, stream: true });
  const events = [];
  let done = false;
  for (const line of r.text.split("\n")) {
    if (!line.startsWith("data: ")) continue;
    if (line === "data: [DONE]") { done = true; continue; }
    events.push(JSON.parse(line.slice(6)));
  }
  return { status: r.status, events, done };
}
// the streamed choices joined: {index: {text, ids, lps (token_logprobs), finish, stop_reason}}
function joinStream(events, isChat) {
  const c = {};
  for (const e of events) for (const ch of e.choices ?? []) {
    const x = c[ch.index] ?? (c[ch.index] = { text: "", ids: [], lps: [], finish: null, stop_reason: null });
    x.text += isChat ? ch.delta?.content ?? "" : ch.text;
    x.ids.push(...(ch.token_ids ?? []));
    if (ch.logprobs) x.lps.push(...(isChat ? ch.logprobs.content.map((t) => t.logprob) : ch.logprobs.token_logprobs));
    if (ch.finish_reason) { x.finish = ch.finish_reason; x.stop_reason = ch.stop_reason ?? null; }
  }
  return c;
}
const errOf = (r) => r.j?.error;

// ---- metadata ----
{
  const h = await fetch(A + "/health");
  ok(h.status === 200, "/health answers 200", h.status);
  const m = await (await fetch(A + "/v1/models")).json();
  const d = m.data?.[0];
  ok(m.object === "list" && d?.id === "tiny-text" && d.object === "model" && typeof d.root === "string" &&
     d.max_model_len === 256 && d.owned_by && d.vocab_size === 129280, "/v1/models in vLLM's shape", short(m));
  const v = await (await fetch(A + "/version")).json();
  ok(typeof v.version === "string" && /node-llama-cpp 3\.22\.1/.test(v.engine), "/version", short(v));
  const mt = await (await fetch(A + "/metrics")).text();
  ok(/vllm:generation_tokens_total \d+/.test(mt), "/metrics", mt.slice(0, 200));
}

// ---- auth ----
{
  const none = await fetch(KEYED + "/v1/models");
  const wrong = await fetch(KEYED + "/v1/models", { headers: { Authorization: "Bearer nope" } });
  const right = await fetch(KEYED + "/v1/models", { headers: { Authorization: `Bearer ${KEY}` } });
  const health = await fetch(KEYED + "/health");
  ok(none.status === 401 && wrong.status === 401 && right.status === 200 && health.status === 200, "API key: 401 without / with a wrong key, 200 with it",
     [none.status, wrong.status, right.status, health.status].join(","));
  const g = await post(KEYED, "/v1/completions", { prompt: "Hi", max_tokens: 2, temperature: 0 }, { Authorization: `Bearer ${KEY}` });
  ok(g.status === 200 && g.j.choices[0].text.length > 0, "a completion through the key", short(g.j));
}

// ---- prompts: text, token ids, tokenizer ----
const PROMPT = "The quick brown fox jumps over the lazy dog. It was a sunny day, and";
const tk = (await post(A, "/tokenize", { prompt: PROMPT })).j;
ok(tk.tokens[0] === 0 && tk.count === tk.tokens.length && tk.count > 10, "/tokenize adds BOS (add_bos_token) and counts", short(tk));
const dt = (await post(A, "/detokenize", { tokens: tk.tokens.slice(1) })).j;
ok(dt.prompt === PROMPT, "/detokenize gives the text back", short(dt));
const G = { prompt: PROMPT, max_tokens: 24, temperature: 0, ignore_eos: true, return_token_ids: true };
const g1 = await cmpl(G);
const base = g1.j.choices[0];
ok(g1.status === 200 && base.token_ids.length === 24 && base.finish_reason === "length", "greedy: max_tokens tokens, finish length", short(g1.j));
ok(g1.j.usage.prompt_tokens === tk.count && g1.j.usage.completion_tokens === 24 && g1.j.usage.total_tokens === tk.count + 24, "usage", short(g1.j.usage));
const g2 = await cmpl({ ...G, prompt: tk.tokens });
ok(short(g2.j.choices[0].token_ids) === short(base.token_ids) && g2.j.choices[0].text === base.text, "token-id prompt = text prompt", short(g2.j.choices[0]));
const g3 = await cmpl(G);
ok(short(g3.j.choices[0].token_ids) === short(base.token_ids), "greedy repeat equal");
for (const prompt of [[PROMPT, PROMPT], [tk.tokens, tk.tokens]]) {
  const bt = await cmpl({ prompt, max_tokens: 4, temperature: 0, return_token_ids: true });
  ok(bt.j?.choices?.length === 2 && bt.j.choices.every((c, i) => c.index === i && short(c.token_ids) === short(base.token_ids.slice(0, 4))),
     "a batch of two prompts", short(bt.j));
}

// ---- stop strings: cut the text before the stop, finish stop ----
{
  const T = base.text;
  let k = -1, s = null;
  for (let at = 4; at + 3 <= T.length && k < 0; at++) { // a stop string that first occurs at `at`
    const cand = T.slice(at, at + 3);
    if (T.indexOf(cand) === at && !/\uFFFD/.test(cand)) { k = at; s = cand; }
  }
  ok(k > 0, "found a stop string in the greedy text", short(T));
  const r = await cmpl({ ...G, stop: ["\u2603never\u2603", s] });
  const c = r.j.choices[0];
  ok(c.text === T.slice(0, k) && c.finish_reason === "stop" && c.stop_reason === s, "stop string: text cut before it, finish stop",
     short({ got: c.text, want: T.slice(0, k), s, fin: c.finish_reason }));
  const inc = await cmpl({ ...G, stop: s, include_stop_str_in_output: true });
  ok(inc.j.choices[0].text === T.slice(0, k + s.length), "include_stop_str_in_output", short(inc.j.choices[0].text));
  const st = await stream("/v1/completions", { ...G, stop: [s], logprobs: 3 });
  const sc = joinStream(st.events, false)[0];
  ok(st.done && sc.text === c.text && sc.finish === "stop" && sc.stop_reason === s, "stop string streamed = not streamed", short(sc));
}

// ---- stop_token_ids and min_tokens ----
{
  const stop = base.token_ids[3];
  const first = base.token_ids.indexOf(stop);
  const r = await cmpl({ ...G, stop_token_ids: [stop] });
  const c = r.j.choices[0];
  ok(short(c.token_ids) === short(base.token_ids.slice(0, first + 1)) && c.finish_reason === "stop" && c.stop_reason === stop,
     "stop_token_ids: stops at the id (returned)", short(c));
  const m = await cmpl({ ...G, stop_token_ids: [stop], min_tokens: first + 3 });
  const mc = m.j.choices[0];
  ok(mc.token_ids.length >= first + 3 && !mc.token_ids.slice(0, first + 3).includes(stop), "min_tokens holds the stop id back", short(mc));
  const bad = await cmpl({ ...G, min_tokens: 30 });
  ok(bad.status === 400 && errOf(bad)?.param === "min_tokens", "min_tokens > max_tokens refused", short(bad.j));
}

// ---- stream == non-stream (greedy with logprobs; seeded sampling; n > 1) ----
{
  const body = { ...G, logprobs: 2, stream_options: { include_usage: true } };
  const ns = (await cmpl(body)).j;
  const st = await stream("/v1/completions", body);
  const c = joinStream(st.events, false)[0];
  ok(st.status === 200 && st.done && c.text === ns.choices[0].text && short(c.ids) === short(ns.choices[0].token_ids) &&
     short(c.lps) === short(ns.choices[0].logprobs.token_logprobs) && c.finish === ns.choices[0].finish_reason,
     "stream = non-stream (greedy, logprobs)", short({ c, ns: ns.choices[0].text }));
  const last = st.events.at(-1);
  ok(last.choices.length === 0 && short(last.usage) === short(ns.usage), "include_usage: a last chunk with the usage", short(last));
  const S = { prompt: PROMPT, max_tokens: 16, temperature: 1, top_k: 20, top_p: 0.9, seed: 7, n: 3, return_token_ids: true, ignore_eos: true };
  const s1 = (await cmpl(S)).j, s2 = (await cmpl(S)).j, s3 = (await cmpl({ ...S, seed: 8 })).j;
  const ids = (j) => j.choices.map((c) => short(c.token_ids));
  ok(short(ids(s1)) === short(ids(s2)), "seeded sampling: the same seed gives the same tokens (n = 3)", short(ids(s1)));
  ok(ids(s1).join() !== ids(s3).join() && new Set(ids(s1)).size === 3, "seeded sampling: another seed and the other choices differ", short([ids(s1), ids(s3)]));
  const ss = joinStream((await stream("/v1/completions", S)).events, false);
  ok([0, 1, 2].every((i) => short(ss[i].ids) === short(s1.choices[i].token_ids) && ss[i].text === s1.choices[i].text),
     "seeded sampling streamed = not streamed", short(ss));
  // the sampled tokens are among the top 20 (top-k) by the server's own raw logprobs
  const lk = (await cmpl({ ...S, n: 1, logprobs: 20 })).j.choices[0];
  ok(lk.logprobs.tokens.every((t, i) => Object.keys(lk.logprobs.top_logprobs[i]).length <= 21 &&
     Object.entries(lk.logprobs.top_logprobs[i]).sort((a, b) => b[1] - a[1]).slice(0, 20).some(([n]) => n === t)),
     "top_k: every sampled token is among the 20 most likely", short(lk.logprobs));
}

// ---- logprobs, echo, prompt_logprobs ----
{
  const r = (await cmpl({ ...G, max_tokens: 6, logprobs: 5 })).j.choices[0];
  const L = r.logprobs;
  ok(L.tokens.length === 6 && L.top_logprobs.every((d) => Object.keys(d).length === 5), "logprobs 5: five alternatives a token", short(L));
  ok(L.token_logprobs.every((lp, i) => lp <= 0 && Math.abs(Math.max(...Object.values(L.top_logprobs[i])) - lp) < 1e-12),
     "greedy: the chosen token's logprob is the largest", short(L.token_logprobs));
  ok(L.top_logprobs.every((d) => Object.values(d).reduce((a, v) => a + Math.exp(v), 0) <= 1 + 1e-6), "top logprobs hold a mass <= 1");
  ok(L.text_offset[0] === 0 && L.text_offset.every((o, i) => i === 0 || o >= L.text_offset[i - 1]), "text_offset", short(L.text_offset));
  const ids = (await cmpl({ ...G, max_tokens: 2, logprobs: 1, return_tokens_as_token_ids: true })).j.choices[0].logprobs;
  ok(ids.tokens.every((t) => /^token_id:\d+$/.test(t)) && Object.keys(ids.top_logprobs[0])[0].startsWith("token_id:"),
     "return_tokens_as_token_ids names tokens by id", short(ids));
  const e = (await cmpl({ prompt: PROMPT, max_tokens: 3, temperature: 0, echo: true, logprobs: 2 })).j.choices[0];
  ok(e.text.startsWith(PROMPT) && e.logprobs.tokens.length === tk.count + 3 && e.logprobs.token_logprobs[0] === null &&
     e.logprobs.token_logprobs.slice(1).every((x) => Number.isFinite(x) && x <= 0), "echo with logprobs: the prompt's tokens first, null first", short(e.logprobs.token_logprobs));
  const e0 = (await cmpl({ prompt: PROMPT, max_tokens: 0, temperature: 0, echo: true, logprobs: 0 })).j.choices[0];
  ok(e0.text === PROMPT && e0.logprobs.tokens.length === tk.count, "echo with max_tokens 0: prompt logprobs only", short(e0));
  const p = (await cmpl({ prompt: PROMPT, max_tokens: 1, temperature: 0, prompt_logprobs: 3 })).j.choices[0];
  const pl = p.prompt_logprobs;
  ok(Array.isArray(pl) && pl.length === tk.count && pl[0] === null &&
     pl.slice(1).every((d, i) => d[tk.tokens[i + 1]] && Number.isFinite(d[tk.tokens[i + 1]].logprob) && Object.keys(d).length >= 3),
     "prompt_logprobs 3: null first, then the prompt token and the top 3", short(pl?.slice(0, 3)));
  ok(pl.slice(1).every((d, i) => Math.abs(d[tk.tokens[i + 1]].logprob - e.logprobs.token_logprobs[i + 1]) < 1e-12),
     "prompt_logprobs = echo's prompt logprobs");
}

// ---- chat ----
{
  const M = [{ role: "system", content: "Be brief." }, { role: "user", content: "Name three colors." }];
  const t = (await post(A, "/tokenize", { messages: M })).j.tokens;
  ok(t[0] === 0 && t.includes(128803) && t.at(-1) === 128804, "the chat template: BOS, <｜User｜>, ends with <｜Assistant｜>", short(t));
  const body = { messages: M, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2, ignore_eos: true };
  const r = (await chat(body)).j;
  const c = r.choices?.[0];
  ok(c?.message?.role === "assistant" && typeof c.message.content === "string" && c.message.content.length > 0 &&
     r.usage.prompt_tokens === t.length && r.object === "chat.completion", "chat completion", short(r));
  ok(c.logprobs.content.length === 8 && c.logprobs.content.every((x) => x.top_logprobs.length === 2 && Array.isArray(x.bytes)),
     "chat logprobs: content with top_logprobs", short(c.logprobs.content[0]));
  const st = await stream("/v1/chat/completions", body);
  const sc = joinStream(st.events, true)[0];
  ok(st.done && sc.text === c.message.content && short(sc.lps) === short(c.logprobs.content.map((x) => x.logprob)) &&
     st.events[0].choices[0].delta.role === "assistant", "chat stream = non-stream", short(sc));
  const cj = (await chat({ messages: M, max_tokens: 60, temperature: 0, response_format: { type: "json_object" } })).j.choices[0];
  let o = null;
  try { o = JSON.parse(cj.message.content); } catch { /* checked below */ }
  ok(o !== null && typeof o === "object" && !Array.isArray(o) && cj.finish_reason === "stop", "chat response_format json_object", short(cj));
}

// ---- structured output ----
{
  const schema = { type: "object", properties: { name: { type: "string", maxLength: 8 }, ok: { type: "boolean" },
                                                 color: { enum: ["red", "green", "blue"] }, n: { type: "integer" } },
                   required: ["name", "ok", "color", "n"] };
  // an integer may come with an exponent (JSON's number syntax), which JSON.parse can overflow
  const valid = (o, text) => o && typeof o.name === "string" && o.name.length <= 8 && typeof o.ok === "boolean" &&
                             ["red", "green", "blue"].includes(o.color) && /"n"\s*:\s*-?(0|[1-9][0-9]*)([eE][+]?[0-9]+)?\s*}$/.test(text);
  for (const [what, extra] of [["guided_json", { guided_json: schema }], ["structured_outputs.json", { structured_outputs: { json: schema } }],
                               ["response_format json_schema", { response_format: { type: "json_schema", json_schema: { name: "x", schema } } }]]) {
    const c = (await cmpl({ prompt: PROMPT, max_tokens: 80, temperature: 0, ...extra })).j.choices[0];
    let o = null;
    try { o = JSON.parse(c.text); } catch { /* checked below */ }
    ok(valid(o, c.text) && c.finish_reason === "stop", `${what}: the output parses and validates`, short(c));
  }
  const sj = (await cmpl({ prompt: PROMPT, max_tokens: 80, temperature: 1, seed: 3, guided_json: schema })).j.choices[0];
  let so = null;
  try { so = JSON.parse(sj.text); } catch { /* checked below */ }
  ok(valid(so, sj.text), "guided_json while sampling (T = 1)", short(sj));
  const CH = ["alpha", "beta", "gamma delta"];
  for (const [what, extra] of [["guided_choice", { guided_choice: CH }], ["structured_outputs.choice", { structured_outputs: { choice: CH } }]]) {
    const c = (await cmpl({ prompt: PROMPT, max_tokens: 20, temperature: 1, seed: 11, ...extra })).j.choices[0];
    ok(CH.includes(c.text) && c.finish_reason === "stop", `${what}: one of the choices`, short(c));
  }
  const IDS = [[101, 102], [103, 104, 105], [101, 106, 107, 108]];
  const ci = (await cmpl({ prompt: [5], max_tokens: 8, temperature: 0, ignore_eos: true, return_token_ids: true, structured_outputs: { choice: IDS } })).j.choices[0];
  ok(IDS.some((x) => short(x) === short(ci.token_ids)) && ci.finish_reason === "stop", "structured_outputs.choice over token ids (vouch's form)", short(ci));
  const RE = "[a-z]{3,6}-[0-9]{2}( (ok|no))?";
  for (const [what, extra] of [["guided_regex", { guided_regex: RE }], ["structured_outputs.regex", { structured_outputs: { regex: RE } }]]) {
    const c = (await cmpl({ prompt: PROMPT, max_tokens: 20, temperature: 0, ...extra })).j.choices[0];
    ok(new RegExp(`^(?:${RE})$`).test(c.text) && c.finish_reason === "stop", `${what}: the output matches in full`, short(c));
  }
  const br = await cmpl({ prompt: PROMPT, max_tokens: 4, guided_regex: "(a)\\1" });
  ok(br.status === 400 && /backreference/.test(errOf(br)?.message) && errOf(br)?.param === "guided_regex", "a regex outside the subset: 400 naming the construct", short(br.j));
  const look = await cmpl({ prompt: PROMPT, max_tokens: 4, guided_regex: "a(?=b)" });
  ok(look.status === 400 && /lookaround/.test(errOf(look)?.message), "lookaround refused", short(look.j));
  const pat = await cmpl({ prompt: PROMPT, max_tokens: 4, guided_json: { type: "string", pattern: "a+" } });
  ok(pat.status === 400 && /pattern/.test(errOf(pat)?.message), "a JSON-schema keyword outside the subset refused", short(pat.j));
  const two = await cmpl({ prompt: PROMPT, max_tokens: 4, guided_regex: "a", guided_choice: ["a"] });
  ok(two.status === 400, "two constraints at once refused", short(two.j));
}

// ---- errors ----
{
  const badJson = await post(A, "/v1/completions", "{not json");
  ok(badJson.status === 400 && typeof errOf(badJson)?.message === "string", "bad JSON: 400 with an OpenAI error", short(badJson.j));
  const long = await cmpl({ prompt: Array(300).fill(5), max_tokens: 1 });
  ok(long.status === 400 && /maximum context length is 256/.test(errOf(long)?.message), "a prompt over max_model_len: 400", short(long.j));
  const over = await cmpl({ prompt: Array(250).fill(5), max_tokens: 10 });
  ok(over.status === 400 && errOf(over)?.param === "max_tokens", "prompt + max_tokens over max_model_len: 400", short(over.j));
  const fits = await cmpl({ prompt: Array(255).fill(5), max_tokens: 1, temperature: 0 });
  ok(fits.status === 200 && fits.j.choices[0].finish_reason === "length", "max_model_len - 1 prompt tokens and 1 generated: served", short(fits.j));
  const temp = await cmpl({ prompt: "x", temperature: -1 });
  ok(temp.status === 400 && errOf(temp)?.param === "temperature", "a bad parameter: 400 naming it", short(temp.j));
  const tokBad = await cmpl({ prompt: [5, 129280] });
  ok(tokBad.status === 400 && errOf(tokBad)?.param === "prompt", "a token id outside the vocabulary: 400", short(tokBad.j));
  const empty = await cmpl({ prompt: [] });
  ok(empty.status === 400, "an empty prompt: 400", short(empty.j));
  const model = await cmpl({ prompt: "x", model: "gpt-9" });
  ok(model.status === 404 && errOf(model)?.code === 404, "an unknown model: 404", short(model.j));
  const get = await fetch(A + "/v1/completions");
  ok(get.status === 405, "GET /v1/completions: 405", get.status);
  const none = await fetch(A + "/v1/nothing");
  ok(none.status === 404, "an unknown path: 404", none.status);
  const big = await post(A, "/v1/completions", JSON.stringify({ prompt: "x".repeat(2 << 20) }));
  ok(big.status === 413, "a body over --max-body-bytes: 413", big.status);
  const pen = await cmpl({ prompt: "x", presence_penalty: 0.5 });
  ok(pen.status === 400 && errOf(pen)?.param === "presence_penalty", "an unsupported parameter: 400", short(pen.j));
}

// ---- concurrency: 8 requests at once over 4 sequences give the tokens they give alone ----
{
  const bodies = Array.from({ length: 8 }, (_, i) => ({ prompt: PROMPT.slice(0, 20 + 5 * i), max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true }));
  const alone = [];
  for (const b of bodies) alone.push((await cmpl(b)).j.choices[0].token_ids);
  const t0 = Date.now();
  const together = await Promise.all(bodies.map((b) => cmpl(b)));
  const ms = Date.now() - t0;
  ok(together.every((r, i) => r.status === 200 && short(r.j.choices[0].token_ids) === short(alone[i])),
     "8 concurrent requests (4 sequences): the tokens they give alone", short(together.map((r) => r.j?.choices?.[0]?.token_ids?.slice(0, 3))));
  // a client that hangs up mid-stream: the server goes on serving
  const ac = new AbortController();
  const rr = await fetch(A + "/v1/completions", { method: "POST", headers: { "Content-Type": "application/json" }, signal: ac.signal,
                                                  body: JSON.stringify({ prompt: PROMPT, max_tokens: 200, stream: true, ignore_eos: true }) });
  const rd = rr.body.getReader();
  await rd.read();
  ac.abort();
  const after = await cmpl({ prompt: PROMPT, max_tokens: 2, temperature: 0 });
  ok(after.status === 200, "served after a client hung up mid-stream", short(after.j));
  console.log(`concurrency: 8 requests of 12 tokens in ${ms} ms`);
}

// ---- A/A and f32 vs q4_0: raw logprobs of the same text ----
{
  const TEXT = "In 1859, Charles Darwin published On the Origin of Species, which introduced the theory that populations evolve over generations.";
  const req = { prompt: TEXT, max_tokens: 4, temperature: 0, prompt_logprobs: 5, logprobs: 5, ignore_eos: true, return_token_ids: true };
  const [a, b, q] = await Promise.all([cmpl(req, A), cmpl(req, A2), cmpl(req, Q)]);
  const pa = a.j.choices[0].prompt_logprobs, pb = b.j.choices[0].prompt_logprobs, pq = q.j.choices[0].prompt_logprobs;
  ok(short(pa) === short(pb) && short(a.j.choices[0].logprobs) === short(b.j.choices[0].logprobs),
     "f32 vs f32 (two servers): logprobs equal", short([pa?.[1], pb?.[1]]));
  const ids = (await post(A, "/tokenize", { prompt: TEXT })).j.tokens;
  let sum = 0, n = 0, maxd = 0;
  for (let i = 1; i < ids.length; i++) {
    const x = pa[i][ids[i]].logprob, y = pq[i][ids[i]].logprob;
    ok(Number.isFinite(x) && Number.isFinite(y) && x <= 0 && y <= 0, `finite logprobs at prompt position ${i}`);
    sum += Math.abs(x - y); n++;
    maxd = Math.max(maxd, Math.abs(x - y));
  }
  ok(sum / n > 1e-3, "f32 vs q4_0: the prompt logprobs differ measurably", `mean |dlogprob| ${sum / n}`);
  ok(sum / n < 2, "f32 vs q4_0: the same model (not unrelated logprobs)", `mean |dlogprob| ${sum / n}`);
  console.log(`f32 vs q4_0: mean |dlogprob| ${(sum / n).toFixed(4)}, max ${maxd.toFixed(4)} over ${n} prompt tokens`);
}

console.log(`${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
