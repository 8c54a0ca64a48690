#!/usr/bin/env node
// An OpenAI-compatible HTTP server over llama.cpp (node-llama-cpp 3.22.1's prebuilt CPU binaries),
// serving one GGUF: vouch's first engine under test that nobody here wrote. docs/llama-cpp.md.
//
//   node server.mjs --gguf F.gguf [--port 8000] [--host 127.0.0.1] [--threads N] [--parallel N]
//                   [--max-model-len L] [--served-model-name NAME] [--api-key KEY] [--batch-size B]
//                   [--max-body-bytes N] [--max-queue N] [--max-logprobs K] [--deps DIR]
//
// Endpoints: GET /health, /version, /v1/models, /metrics; POST /v1/completions,
// /v1/chat/completions, /tokenize, /detokenize. The API key (--api-key, better the environment
// variable VOUCH_LLAMACPP_API_KEY: a command line shows in ps) guards /v1/*, /tokenize and
// /detokenize with a Bearer check.
//
// How it runs llama.cpp: one llama.cpp context with --parallel sequences (KV slots). Requests
// (each choice of each prompt is one sequence) wait in a FIFO queue for a free slot; every engine
// step puts one pending token of each decoding sequence and prompt chunks of prefilling ones into
// ONE llama_decode batch (at most --batch-size tokens), so concurrent requests are batched, not
// serialized. This drives node-llama-cpp's native binding (the addon's context: initBatch /
// addToBatch / decodeBatch / sampleToken, and its sampler) below its public API, because two
// samplers per position are needed: the request's (temperature, top-k/p, bias, grammar) picks the
// token; a plain greedy one over the full vocabulary gives the logprobs. Those are log-softmax
// values of llama.cpp's raw logits at temperature 1 over every token (logit - max - ln sum
// exp(logit - max), the sum over the full vocabulary as the addon computes it in float32), before
// any sampling parameter, bias or constraint: two builds can be compared by KLD on them. The
// binding is pinned: another node-llama-cpp version is refused at start.
//
// Chat: the GGUF's tokenizer.chat_template is rendered with @huggingface/jinja (as Hugging Face /
// vLLM apply it: messages, add_generation_prompt, bos_token, eos_token), then tokenized with
// special tokens parsed and no BOS added (the template writes it). node-llama-cpp's chat wrappers
// are not used: they re-express a chat in their own segment model (its DeepSeek wrapper is its own
// rewrite of the format); rendering the template itself gives the tokens vLLM would send.
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { RegexError, gbnfLiteral, regexToGbnf } from "./regex_gbnf.mjs";

const SERVER_VERSION = "vouch-llamacpp-server/1";
const NODE_LLAMA_CPP = "3.22.1"; // the binding version this file drives
const PROMPT_LP_CHUNK = 64;      // prompt positions per batch when prompt logprobs are asked (bounds the logits buffer)

const utf8 = () => new TextDecoder("utf-8", { ignoreBOM: true }); // keeps a leading U+FEFF: the text is the tokens' bytes

function die(msg) {
  console.error(`server.mjs: ${msg}`);
  process.exit(1);
}

// ---- options ----
const OPTS = {
  gguf: null, port: "8000", host: "127.0.0.1", threads: "0", parallel: "4", "max-model-len": null,
  "served-model-name": null, "api-key": null, "batch-size": "512", "max-body-bytes": String(8 << 20),
  "max-queue": "1024", "max-logprobs": "20", deps: null,
};
function parseArgs(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === "-h" || k === "--help") {
      console.log("usage: node server.mjs --gguf F.gguf [--port 8000] [--host 127.0.0.1] [--threads N] [--parallel N]\n" +
                  "         [--max-model-len L] [--served-model-name NAME] [--api-key KEY (or VOUCH_LLAMACPP_API_KEY)]\n" +
                  "         [--batch-size B] [--max-body-bytes N] [--max-queue N] [--max-logprobs K] [--deps DIR]");
      process.exit(0);
    }
    if (!k.startsWith("--") || !(k.slice(2) in OPTS)) die(`unknown option '${k}' (see --help)`);
    if (i + 1 >= argv.length) die(`option ${k} needs a value`);
    a[k.slice(2)] = argv[++i];
  }
  return { ...OPTS, ...a };
}
const args = parseArgs(process.argv.slice(2));
const intOpt = (k, lo, hi) => {
  const v = Number(args[k]);
  if (!Number.isInteger(v) || v < lo || v > hi) die(`option --${k}: expected an integer in [${lo}, ${hi}], got '${args[k]}'`);
  return v;
};
if (!args.gguf) die("give --gguf FILE");
const deps = args.deps || process.env.VOUCH_LLAMACPP_DIR;
if (!deps) die("give --deps DIR or set VOUCH_LLAMACPP_DIR (the folder install.sh installed into)");
const dep = (p) => pathToFileURL(path.join(deps, "node_modules", p)).href;
const PORT = intOpt("port", 0, 65535), PARALLEL = intOpt("parallel", 1, 256), BATCH = intOpt("batch-size", 8, 65536);
const THREADS = intOpt("threads", 0, 1024) || os.availableParallelism();
const MAX_BODY = intOpt("max-body-bytes", 1024, 1 << 30), MAX_QUEUE = intOpt("max-queue", 1, 1 << 20);
const MAX_LOGPROBS = intOpt("max-logprobs", 1, 1000);
const API_KEY = args["api-key"] ?? process.env.VOUCH_LLAMACPP_API_KEY ?? null;

// ---- errors: OpenAI's shape {"error": {message, type, param, code}} ----
class ApiError extends Error {
  constructor(status, message, param = null) {
    super(message);
    this.status = status;
    this.param = param;
  }
}
const bad = (message, param = null) => new ApiError(400, message, param);
const ERROR_TYPES = { 400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError", 405: "MethodNotAllowed",
                      413: "RequestTooLarge", 503: "ServiceUnavailable", 500: "InternalServerError" };
function errorBody(status, message, param = null) {
  return { error: { message, type: ERROR_TYPES[status] ?? "Error", param, code: status } };
}

// ---- llama.cpp ----
const nlcVersion = JSON.parse(fs.readFileSync(path.join(deps, "node_modules/node-llama-cpp/package.json"))).version;
if (nlcVersion !== NODE_LLAMA_CPP)
  die(`node-llama-cpp ${nlcVersion} installed, this server drives the native binding of ${NODE_LLAMA_CPP} (scripts/peers/llamacpp/install.sh)`);
const release = JSON.parse(fs.readFileSync(path.join(deps, "node_modules/node-llama-cpp/llama/binariesGithubRelease.json"))).release;
const ENGINE = `llama.cpp ${release} via node-llama-cpp ${nlcVersion} (cpu)`;
const { getLlama, LlamaLogLevel, LlamaGrammarEvaluationState } = await import(dep("node-llama-cpp/dist/index.js"));
const { Template } = await import(dep("@huggingface/jinja/dist/index.js"));

const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, logLevel: LlamaLogLevel.error });
let model;
try {
  model = await llama.loadModel({ modelPath: path.resolve(args.gguf), gpuLayers: 0 });
} catch (e) {
  /* one line: llama.cpp quotes the file's first bytes, which may hold line breaks */
  die(`${args.gguf}: llama.cpp cannot load it: ${String(e.message).replace(/[\x00-\x1f\x7f]+/g, " ")}`);
}
const META = model.fileInfo.metadata;
const ARCH = META.general?.architecture;
const TRAIN_CTX = Number(META[ARCH]?.context_length ?? model.trainContextSize ?? 4096);
const MAX_LEN = args["max-model-len"] ? intOpt("max-model-len", 2, 1 << 24) : TRAIN_CTX;
if (MAX_LEN > TRAIN_CTX) die(`--max-model-len ${MAX_LEN} exceeds the model's context_length ${TRAIN_CTX}`);
const MODEL_NAME = args["served-model-name"] || path.basename(args.gguf).replace(/\.gguf$/, "");
// /v1/models' root: the checkpoint the GGUF was made from (general.name: `vouch model export` writes the
// source model there), so that an f32 and a q4_0 export of one checkpoint are one model served two ways,
// as vLLM's root names the checkpoint whatever the quantization; the file's path when the GGUF has none
const ROOT = typeof META.general?.name === "string" && META.general.name ? META.general.name : path.resolve(args.gguf);
const context = await model.createContext({ contextSize: MAX_LEN, sequences: PARALLEL, batchSize: BATCH, threads: THREADS });
const ctx = context._ctx; // the addon context (see the header)
for (const f of ["initBatch", "addToBatch", "decodeBatch", "sampleToken", "disposeSequence", "getContextSize"])
  if (typeof ctx?.[f] !== "function") die(`node-llama-cpp's addon context lacks ${f}: not the binding this server was written for`);
const AddonSampler = llama._bindings?.AddonSampler;
if (typeof AddonSampler !== "function") die("node-llama-cpp's addon lacks AddonSampler");
if (Math.floor(ctx.getContextSize() / PARALLEL) < MAX_LEN)
  die(`the context holds ${ctx.getContextSize()} cells for ${PARALLEL} sequences, fewer than --max-model-len ${MAX_LEN} each`);

// ---- the vocabulary: token bytes for text, EOG ids, the chat template ----
const NORMAL = 1, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5;
class Vocab {
  constructor() {
    const tk = META.tokenizer?.ggml ?? {};
    this.kind = tk.model;
    this.tokens = tk.tokens ?? [];
    this.types = tk.token_type ?? [];
    this.n = Number(META[ARCH]?.vocab_size ?? this.tokens.length);
    if (this.tokens.length !== this.n) die(`${args.gguf}: ${this.tokens.length} tokens for vocab_size ${this.n}`);
    this.bos = tk.bos_token_id ?? null;
    this.eos = tk.eos_token_id ?? null;
    this.addBos = tk.add_bos_token === true;
    this.template = META.tokenizer?.chat_template ?? null;
    this.hasText = this.kind === "gpt2"; // a real tokenizer (the "test" vocabulary is ids only)
    // GPT-2's byte <-> printable code point table (byte-level BPE)
    this.byteOf = new Map();
    let extra = 0;
    for (let b = 0; b < 256; b++) {
      const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      this.byteOf.set(printable ? b : 256 + extra++, b);
    }
    this.pieces = new Array(this.n);
    this.eog = new Set();
    for (let t = 0; t < this.n; t++) if (this.types[t] !== NORMAL && model.isEogToken(t)) this.eog.add(t);
    if (this.eos != null) this.eog.add(Number(this.eos));
    this.enc = new TextEncoder();
  }
  special(t) {
    const ty = this.types[t];
    return ty === CONTROL || ty === UNUSED;
  }
  // the token's bytes (a control token's text as is)
  piece(t) {
    let p = this.pieces[t];
    if (p) return p;
    const s = this.tokens[t], ty = this.types[t] ?? NORMAL;
    if (ty === NORMAL || ty === 6 /* byte */) {
      const out = [];
      for (const ch of s) {
        const b = this.byteOf.get(ch.codePointAt(0));
        if (b !== undefined) out.push(b);
        else out.push(...this.enc.encode(ch));
      }
      p = Uint8Array.from(out);
    } else {
      p = this.enc.encode(s);
    }
    return (this.pieces[t] = p);
  }
  outBytes(t, skipSpecial) {
    return skipSpecial && this.special(t) ? new Uint8Array(0) : this.piece(t);
  }
  display(t) {
    return utf8().decode(this.piece(t));
  }
  render(ids, skipSpecial) {
    const d = utf8();
    let s = "";
    for (const t of ids) s += d.decode(this.outBytes(t, skipSpecial), { stream: true });
    return s + d.decode();
  }
  tokenize(text, addBos) {
    if (!this.hasText) throw bad("this GGUF has no tokenizer (llama.cpp's id-only vocabulary): give the prompt as token ids", "prompt");
    const ids = Array.from(model.tokenize(text, true));
    if (addBos && this.bos != null) ids.unshift(Number(this.bos));
    return ids;
  }
}
const vocab = new Vocab();

// ---- structured output: grammars (llama.cpp GBNF through node-llama-cpp) ----
const grammarCache = new Map(); // key -> Promise<LlamaGrammar>, at most 64
async function grammarFor(key, make) {
  if (!grammarCache.has(key)) {
    if (grammarCache.size >= 64) grammarCache.delete(grammarCache.keys().next().value);
    const p = make();
    grammarCache.set(key, p);
    p.catch(() => grammarCache.delete(key));
  }
  return grammarCache.get(key);
}
// Any JSON object, with at most 8 blanks between tokens and none after the closing brace (a
// grammar written here: llama.cpp's json.gbnf lets 21 blanks follow the object).
const JSON_OBJECT_GBNF = String.raw`root   ::= object
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
value  ::= object | array | string | number | "true" | "false" | "null"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,4} )?
ws     ::= [ \t\n]{0,8}
`;
const gbnf = (text, param) => grammarFor("gbnf:" + text, async () => {
  try {
    return await llama.createGrammar({ grammar: text });
  } catch (e) {
    throw bad(`the constraint does not compile to a llama.cpp grammar: ${e.message}`, param);
  }
});

// The JSON-schema subset node-llama-cpp's createGrammarForJsonSchema implements; other keywords
// would be ignored silently there, so they are refused here. Returns a normalized copy.
const SCHEMA_TYPES = ["string", "number", "integer", "boolean", "null", "object", "array"];
const SCHEMA_IGNORED = new Set(["title", "description", "default", "examples", "$schema", "$id", "$comment", "required", "strict"]);
const SCHEMA_KNOWN = new Set(["type", "properties", "additionalProperties", "minProperties", "maxProperties", "items",
                              "prefixItems", "minItems", "maxItems", "enum", "const", "oneOf", "anyOf", "minLength",
                              "maxLength", "format", "$ref", "$defs"]);
const SCHEMA_FORMATS = new Set(["date-time", "time", "date"]);
function normSchema(s, where = "schema", depth = 0) {
  if (depth > 64) throw bad(`${where}: nested deeper than 64 levels`, "json_schema");
  if (s === true || (s && typeof s === "object" && !Array.isArray(s) && Object.keys(s).length === 0))
    return { type: ["string", "number", "boolean", "null"] }; // any scalar (objects/arrays: give a type)
  if (!s || typeof s !== "object" || Array.isArray(s)) throw bad(`${where}: a schema must be an object`, "json_schema");
  const o = {};
  for (const [k, v] of Object.entries(s)) {
    if (SCHEMA_IGNORED.has(k)) continue;
    if (!SCHEMA_KNOWN.has(k)) throw bad(`${where}: the keyword '${k}' is not supported (node-llama-cpp's JSON-schema grammar; docs/llama-cpp.md)`, "json_schema");
    if (k === "properties" || k === "$defs") {
      if (!v || typeof v !== "object" || Array.isArray(v)) throw bad(`${where}.${k}: an object is required`, "json_schema");
      o[k] = Object.fromEntries(Object.entries(v).map(([n, sub]) => [n, normSchema(sub, `${where}.${k}.${n}`, depth + 1)]));
    } else if (k === "items" || (k === "additionalProperties" && typeof v === "object")) {
      o[k] = normSchema(v, `${where}.${k}`, depth + 1);
    } else if (k === "prefixItems" || k === "oneOf" || k === "anyOf") {
      if (!Array.isArray(v) || !v.length) throw bad(`${where}.${k}: a non-empty array is required`, "json_schema");
      o[k === "anyOf" ? "oneOf" : k] = v.map((sub, i) => normSchema(sub, `${where}.${k}[${i}]`, depth + 1));
    } else if (k === "type") {
      const ts = Array.isArray(v) ? v : [v];
      if (!ts.length || ts.some((t) => !SCHEMA_TYPES.includes(t))) throw bad(`${where}.type: unknown type ${JSON.stringify(v)}`, "json_schema");
      if (ts.length > 1 && ts.some((t) => t === "object" || t === "array"))
        throw bad(`${where}.type: a list of types with object or array is not supported`, "json_schema");
      o.type = v;
    } else if (k === "format") {
      if (!SCHEMA_FORMATS.has(v)) throw bad(`${where}.format: '${v}' is not supported (date-time, time, date)`, "json_schema");
      o.format = v;
    } else if (k === "$ref") {
      if (typeof v !== "string" || !v.startsWith("#/$defs/")) throw bad(`${where}.$ref: only '#/$defs/NAME' references are supported`, "json_schema");
      o.$ref = v;
    } else if (k === "enum") {
      if (!Array.isArray(v) || !v.length) throw bad(`${where}.enum: a non-empty array is required`, "json_schema");
      o.enum = v;
    } else {
      o[k] = v;
    }
  }
  if (o.type === "object" && !o.properties && o.additionalProperties === undefined) o.additionalProperties = true;
  if (o.type === "object" && o.additionalProperties === true && o.properties === undefined) o.properties = {};
  return o;
}

// The request's constraint: {grammar, choiceIds (a trie over token-id choices) | null, kind} or null.
async function constraintOf(b, chat) {
  const so = b.structured_outputs ?? null;
  if (so !== null && (typeof so !== "object" || Array.isArray(so))) throw bad("structured_outputs must be an object", "structured_outputs");
  const found = [];
  const add = (kind, v, param) => { if (v !== undefined && v !== null) found.push({ kind, v, param }); };
  add("json", b.guided_json, "guided_json");
  add("regex", b.guided_regex, "guided_regex");
  add("choice", b.guided_choice, "guided_choice");
  if (b.guided_grammar !== undefined && b.guided_grammar !== null) throw bad("guided_grammar is not supported (use guided_json, guided_regex or guided_choice)", "guided_grammar");
  if (so) {
    for (const k of Object.keys(so))
      if (!["json", "regex", "choice", "json_object"].includes(k)) throw bad(`structured_outputs.${k} is not supported (json, regex, choice, json_object)`, "structured_outputs");
    add("json", so.json, "structured_outputs.json");
    add("regex", so.regex, "structured_outputs.regex");
    add("choice", so.choice, "structured_outputs.choice");
    if (so.json_object === true) found.push({ kind: "json_object", v: true, param: "structured_outputs.json_object" });
  }
  const rf = b.response_format;
  if (rf !== undefined && rf !== null) {
    if (typeof rf !== "object" || typeof rf.type !== "string") throw bad("response_format must be {type: ...}", "response_format");
    if (rf.type === "json_schema") {
      const sch = rf.json_schema?.schema;
      if (!sch || typeof sch !== "object") throw bad("response_format.json_schema.schema must be a JSON schema object", "response_format");
      found.push({ kind: "json", v: sch, param: "response_format" });
    } else if (rf.type === "json_object") found.push({ kind: "json_object", v: true, param: "response_format" });
    else if (rf.type !== "text") throw bad(`response_format.type '${rf.type}' is not supported (text, json_object, json_schema)`, "response_format");
  }
  if (!found.length) return null;
  if (found.length > 1) throw bad(`only one structured-output constraint per request (got ${found.map((f) => f.param).join(", ")})`, found[1].param);
  const { kind, v, param } = found[0];
  if (kind === "json") {
    let sch = v;
    if (typeof sch === "string") {
      try { sch = JSON.parse(sch); } catch { throw bad(`${param}: not valid JSON`, param); }
    }
    const norm = normSchema(sch);
    const key = "json:" + JSON.stringify(norm);
    const grammar = await grammarFor(key, async () => {
      let text;
      try {
        text = (await llama.createGrammarForJsonSchema(norm)).grammar;
      } catch (e) {
        throw bad(`${param}: ${e.message}`, param);
      }
      // node-llama-cpp ends the root rule with "\n\n\n\n" [\n]* (for its chat sessions): the
      // output ends at the closing brace here, as a JSON-schema constraint in vLLM does
      const cut = text.replace(/^(root ::= .*?) "\\n\\n\\n\\n" \[\\n\]\*$/m, "$1");
      return llama.createGrammar({ grammar: cut });
    });
    return { grammar, kind, choiceIds: null };
  }
  if (kind === "json_object") return { grammar: await gbnf(JSON_OBJECT_GBNF, param), kind, choiceIds: null };
  if (kind === "regex") {
    if (typeof v !== "string") throw bad(`${param} must be a string`, param);
    let text;
    try { text = regexToGbnf(v); } catch (e) {
      if (e instanceof RegexError) throw bad(`${param}: ${e.message}`, param);
      throw e;
    }
    return { grammar: await gbnf(text, param), kind, choiceIds: null };
  }
  // choice: strings (text), or lists of token ids (vouch's extension, as vouch serve takes them)
  if (!Array.isArray(v) || !v.length || v.length > 1024) throw bad(`${param} must be a list of 1..1024 choices`, param);
  if (v.every((c) => typeof c === "string")) {
    if (v.some((c) => !c.length)) throw bad(`${param}: a choice is empty`, param);
    return { grammar: await gbnf("root ::= " + v.map(gbnfLiteral).join(" | ") + "\n", param), kind, choiceIds: null };
  }
  const root = { next: new Map(), end: false };
  v.forEach((c, i) => {
    if (!Array.isArray(c) || !c.length || c.length > 4096)
      throw bad(`${param}[${i}]: each choice must be a string (all of them) or a non-empty list of token ids (all of them)`, param);
    let node = root;
    c.forEach((t, k) => {
      if (!Number.isInteger(t) || t < 0 || t >= vocab.n) throw bad(`${param}[${i}][${k}] is not a token id in [0, ${vocab.n})`, param);
      if (!node.next.has(t)) node.next.set(t, { next: new Map(), end: false });
      node = node.next.get(t);
    });
    node.end = true;
  });
  // sampled in this file over the logits of the ids the choices admit next (llama.cpp's token
  // grammar elements refuse a token whose bytes are an incomplete UTF-8 character)
  return { grammar: null, kind, choiceIds: root };
}

// ---- the engine: slots (llama.cpp sequences), a FIFO queue, one batch per step ----
const stats = { prompt: 0, generation: 0, finished: { stop: 0, length: 0, abort: 0, error: 0 }, steps: 0 };
class Job {
  constructor(spec) {
    Object.assign(this, spec); // prompt, maxTokens, minTokens, sampling, logprobs, promptLogprobs, stop..., constraint
    this.pending = this.prompt.slice();
    this.pos = 0;           // tokens in the sequence's KV
    this.fedPrompt = 0;     // prompt tokens fed so far
    this.out = [];          // generated ids
    this.outLp = [];        // per generated token: {lp, top: [[id, lp]...]} (when logprobs >= 0)
    this.promptLp = [null]; // per prompt position >= 1: {lp, top} (when prompt logprobs are asked)
    this.text = "";         // decoded text of out (special tokens per skipSpecial)
    this.offsets = [];      // per generated token: its text offset
    this.decoder = utf8();
    this.finish = null;     // "stop" | "length" | "abort" | "error"
    this.stopReason = null; // the stop string or token id that ended it
    this.final = null;      // the text after a stop string cut it
    this.slot = -1;
    this.cancelled = false;
    this.cfgKey = null;
    this.choiceNode = this.constraint?.choiceIds ?? null;
    this.listener = null;   // called after each token and at the end (streaming)
    this.done = new Promise((res) => (this.resolve = res));
  }
  get ended() { return this.finish !== null; }
}

class Engine {
  constructor() {
    this.slots = new Array(PARALLEL).fill(null);
    this.queue = [];
    this.running = false;
  }
  get active() { return this.slots.filter(Boolean).length; }
  room(n) {
    if (this.queue.length + n > MAX_QUEUE) throw new ApiError(503, `the queue is full (${MAX_QUEUE} waiting sequences)`);
  }
  submit(jobs) {
    this.room(jobs.length);
    this.queue.push(...jobs);
    void this.run();
  }
  async run() {
    if (this.running) return;
    this.running = true;
    try {
      for (;;) {
        this.admit();
        if (!this.slots.some(Boolean)) break;
        await this.step();
      }
    } catch (e) {
      console.error(`server.mjs: engine: ${e?.stack ?? e}`);
      for (const j of [...this.slots.filter(Boolean), ...this.queue.splice(0)]) this.end(j, "error", String(e?.message ?? e));
    } finally {
      this.running = false;
    }
    if (this.queue.length) void this.run();
  }
  admit() {
    this.queue = this.queue.filter((j) => {
      if (j.cancelled) { this.end(j, "abort"); return false; }
      return true;
    });
    for (let s = 0; s < PARALLEL && this.queue.length; s++) {
      if (this.slots[s]) continue;
      const j = this.queue.shift();
      ctx.disposeSequence(s); // empties the slot's KV cells
      j.slot = s;
      this.slots[s] = j;
      j.samplerB = new AddonSampler(model._model);
      if (j.logprobs >= 0 || j.promptLogprobs >= 0 || j.choiceNode) {
        // the raw logits: A (greedy, nothing else) sums exp(logit - max) over the vocabulary and
        // reads the chosen token's logit; C (top-k, temperature 1) finds the top k and the max
        // (a top-k selection instead of A's full sort of the vocabulary: 0.2 ms, not 25 ms)
        j.samplerA = new AddonSampler(model._model);
        j.samplerA.applyConfig({ temperature: 0 });
        j.samplerC = new AddonSampler(model._model);
        j.samplerC.applyConfig({ temperature: 1, topK: Math.max(1, j.logprobs, j.promptLogprobs), seed: 0 });
      }
      if (j.constraint?.grammar) j.grammarState = new LlamaGrammarEvaluationState({ model, grammar: j.constraint.grammar });
      if (j.choiceNode) j.rng = mulberry32(j.sampling.seed);
    }
  }
  end(j, finish, error = null) {
    if (j.ended) return;
    j.finish = finish;
    j.error = error;
    stats.finished[finish] = (stats.finished[finish] ?? 0) + 1;
    if (j.slot >= 0 && this.slots[j.slot] === j) this.slots[j.slot] = null;
    j.samplerA?.dispose();
    j.samplerB?.dispose();
    j.samplerC?.dispose();
    j.samplerA = j.samplerB = j.samplerC = j.grammarState = null;
    if (j.final === null) j.text += j.decoder.decode();
    j.listener?.(j);
    j.resolve();
  }
  async step() {
    const jobs = this.slots.filter(Boolean);
    for (const j of jobs) if (j.cancelled) this.end(j, "abort");
    // decoding sequences first (one token each), then prompt chunks, oldest first
    const live = this.slots.filter(Boolean).sort((a, b) => (a.fedPrompt < a.prompt.length) - (b.fedPrompt < b.prompt.length) || a.seq - b.seq);
    let budget = BATCH;
    const plan = [];
    for (const j of live) {
      if (!budget) break;
      const inPrompt = j.fedPrompt < j.prompt.length;
      let n = Math.min(j.pending.length, budget);
      if (inPrompt) n = Math.min(n, j.prompt.length - j.fedPrompt);
      if (inPrompt && j.promptLogprobs >= 0) n = Math.min(n, PROMPT_LP_CHUNK);
      if (n <= 0) continue;
      const start = j.pos, toks = j.pending.splice(0, n);
      const reachesEnd = !inPrompt || j.fedPrompt + n === j.prompt.length;
      const idx = [];
      if (inPrompt && j.promptLogprobs >= 0) for (let k = 0; k < n; k++) { if (start + k + 1 < j.prompt.length || j.maxTokens > 0) idx.push(k); }
      else if (reachesEnd && j.maxTokens > 0) idx.push(n - 1);
      plan.push({ j, start, toks, idx, inPrompt, reachesEnd });
      j.pos += n;
      if (inPrompt) j.fedPrompt += n;
      budget -= n;
    }
    if (!plan.length) { // cannot happen (a live sequence always has a token to feed); never spin on it
      for (const j of live) this.end(j, "error", "the engine had nothing to feed for a live sequence");
      return;
    }
    ctx.initBatch(plan.reduce((a, p) => a + p.toks.length, 0));
    for (const p of plan) p.li = ctx.addToBatch(p.j.slot, p.start, Uint32Array.from(p.toks), Uint32Array.from(p.idx));
    try {
      await ctx.decodeBatch();
    } catch (e) {
      for (const p of plan) this.end(p.j, "error", `llama_decode failed: ${e.message}`);
      return;
    }
    stats.steps++;
    for (const p of plan) if (p.inPrompt) stats.prompt += p.toks.length;
    await Promise.all(plan.map((p) => this.after(p).catch((e) => this.end(p.j, "error", String(e?.message ?? e)))));
  }
  // the logits of plan p's positions: prompt logprobs, then the next token
  async after(p) {
    const j = p.j;
    for (let q = 0; q < p.idx.length && !j.ended; q++) {
      const at = p.start + p.idx[q]; // the position whose logits these are
      if (p.inPrompt && at + 1 < j.prompt.length) {
        j.promptLp[at + 1] = await this.rawLp(j, p.li[q], j.prompt[at + 1], j.promptLogprobs);
      } else {
        await this.generate(j, p.li[q]);
      }
    }
    if (p.inPrompt && p.reachesEnd && j.maxTokens === 0 && !j.ended) this.end(j, "length");
  }
  // llama.cpp's raw log-softmax at batch logit index li: token t's logprob and the top k
  async rawLp(j, li, t, k) {
    const [ra, rc] = await Promise.all([
      ctx.sampleToken(li, j.samplerA, false, false, [[t], false, false, false, 0], true), // [t, logit], W
      ctx.sampleToken(li, j.samplerC, false, false, [[], false, false, false, Math.max(1, k)], false), // top k, sorted
    ]);
    const a = ra[3], W = ra[4], c = rc[3];
    if (!a || a[0] !== t || !c || !c.length || !(W >= 1)) throw new Error("the addon returned no logits");
    const lz = c[1] + Math.log(W); // max logit + ln sum exp(logit - max)
    const top = [];
    for (let q = 0; q < k && 2 * q < c.length; q++) top.push([c[2 * q], c[2 * q + 1] - lz]);
    return { lp: a[1] - lz, top };
  }
  samplerConfig(j) {
    const s = j.sampling, c = { temperature: s.temperature };
    if (s.temperature > 0) {
      if (s.topK > 0) c.topK = s.topK;
      if (s.topP < 1) c.topP = s.topP;
      if (s.minP > 0) c.minP = s.minP;
      c.seed = s.seed;
    }
    const bias = new Map(j.logitBias);
    const early = j.out.length < j.minTokens;
    // ignore_eos and min_tokens hold back EOG (not under a constraint: the grammar ends only
    // with EOG, and the constraint wins), min_tokens the stop ids too
    if ((j.ignoreEos || early) && !j.constraint) for (const t of vocab.eog) bias.set(t, -Infinity);
    if (early) for (const t of j.stopIds) bias.set(t, -Infinity);
    if (bias.size) {
      c.tokenBiasKeys = Uint32Array.from(bias.keys());
      c.tokenBiasValues = Float32Array.from(bias.values());
    }
    if (j.grammarState) c.grammarEvaluationState = j.grammarState._state;
    return c;
  }
  // vouch's token-id choices: the next token among the ids the choices admit (and EOS where a
  // choice is complete), sampled here from llama.cpp's logits of those ids with the request's
  // temperature / top-k / top-p / min-p and logit_bias, seeded by the request
  async sampleChoice(j, li) {
    const node = j.choiceNode, allowed = [...node.next.keys()];
    const eos = vocab.eos ?? [...vocab.eog][0];
    if (node.end && eos != null && !node.next.has(eos)) allowed.push(Number(eos));
    const r = await ctx.sampleToken(li, j.samplerA, false, false, [allowed, false, false, false, 0], false);
    const a = r[3], cand = [];
    const early = j.out.length < j.minTokens;
    for (let q = 0; q < a.length; q += 2) {
      if (early && j.stopIds.has(a[q])) continue;
      cand.push([a[q], a[q + 1] + (j.logitBias.get(a[q]) ?? 0)]);
    }
    return pick(cand, j.sampling, j.rng);
  }
  async generate(j, li) {
    if (j.choiceNode) {
      const t = await this.sampleChoice(j, li);
      if (t < 0) return this.end(j, "stop");
      return this.accept(j, t, j.logprobs >= 0 ? await this.rawLp(j, li, t, j.logprobs) : null);
    }
    const c = this.samplerConfig(j);
    const key = JSON.stringify([c.temperature, c.topK, c.topP, c.minP, c.seed, c.tokenBiasKeys && [...c.tokenBiasKeys]]);
    if (key !== j.cfgKey) {
      j.samplerB.applyConfig(c);
      j.cfgKey = key;
    }
    let t;
    try {
      const r = await ctx.sampleToken(li, j.samplerB);
      t = Array.isArray(r) ? r[0] : r;
    } catch (e) {
      if (j.constraint) return this.end(j, "stop"); // nothing the grammar admits is left
      throw e;
    }
    if (!(t >= 0)) return this.end(j, "stop");
    const lp = j.logprobs >= 0 ? await this.rawLp(j, li, t, j.logprobs) : null;
    this.accept(j, t, lp);
  }
  accept(j, t, lp) {
    const isEog = vocab.eog.has(t);
    if (isEog && j.constraint && j.ignoreEos) return this.end(j, "stop"); // the constraint ended it
    j.out.push(t);
    j.outLp.push(lp);
    stats.generation++;
    const before = j.text.length;
    j.offsets.push(before);
    j.text += j.decoder.decode(vocab.outBytes(t, j.skipSpecial), { stream: true });
    const n = j.out.length;
    if (j.choiceNode) j.choiceNode = j.choiceNode.next.get(t) ?? null;
    // (before min_tokens the sampler held the stop ids and EOG back)
    if (j.stopIds.has(t)) { j.stopReason = t; return this.end(j, "stop"); }
    if (isEog && (!j.ignoreEos || j.constraint)) return this.end(j, "stop");
    if (j.constraint?.choiceIds && (!j.choiceNode || (j.choiceNode.end && !j.choiceNode.next.size))) return this.end(j, "stop");
    if (j.stops.length && n >= j.minTokens) {
      const from = Math.max(0, before - j.maxStop + 1);
      let best = -1, which = null;
      for (const s of j.stops) {
        const k = j.text.indexOf(s, from);
        if (k >= 0 && (best < 0 || k < best)) { best = k; which = s; }
      }
      if (best >= 0) {
        j.stopReason = which;
        j.final = j.text.slice(0, best + (j.includeStop ? which.length : 0));
        j.text = j.final;
        return this.end(j, "stop");
      }
    }
    if (n >= j.maxTokens) return this.end(j, "length");
    j.pending.push(t);
    j.listener?.(j);
  }
}
const engine = new Engine();

// A seeded uniform [0, 1) stream (mulberry32).
function mulberry32(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
// One token of cand [[id, logit]] under sampling s (temperature 0: the largest logit, the lower
// id on a tie; else top-k, top-p, min-p on the tempered softmax, then a draw); -1 when empty.
function pick(cand, s, rng) {
  if (!cand.length) return -1;
  const c = cand.filter(([, l]) => l > -Infinity).sort((x, y) => y[1] - x[1] || x[0] - y[0]);
  if (!c.length) return -1;
  if (s.temperature <= 0) return c[0][0];
  let k = s.topK > 0 ? Math.min(s.topK, c.length) : c.length;
  const p = c.slice(0, k).map(([, l]) => Math.exp((l - c[0][1]) / s.temperature));
  let z = p.reduce((a, v) => a + v, 0);
  if (s.topP < 1) {
    let cum = 0, keep = 0;
    while (keep < k && cum < s.topP * z) cum += p[keep++];
    k = Math.max(1, keep);
  }
  if (s.minP > 0) k = Math.max(1, p.slice(0, k).filter((v) => v >= s.minP * p[0]).length);
  z = p.slice(0, k).reduce((a, v) => a + v, 0);
  let u = rng() * z;
  for (let i = 0; i < k; i++) if ((u -= p[i]) < 0) return c[i][0];
  return c[k - 1][0];
}
let jobSeq = 0;

// ---- requests ----
function isObj(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
function num(b, k, { lo = -Infinity, hi = Infinity, int = false, def } = {}) {
  const v = b[k];
  if (v === undefined || v === null) return def;
  if (typeof v !== "number" || !Number.isFinite(v) || (int && !Number.isInteger(v)) || v < lo || v > hi)
    throw bad(`'${k}' must be ${int ? "an integer" : "a number"} in [${lo}, ${hi}], got ${JSON.stringify(v).slice(0, 40)}`, k);
  return v;
}
function bool(b, k, def) {
  const v = b[k];
  if (v === undefined || v === null) return def;
  if (typeof v !== "boolean") throw bad(`'${k}' must be true or false`, k);
  return v;
}
function tokenIds(v, param) {
  if (!v.length) throw bad(`'${param}' holds an empty list of token ids`, param);
  for (const t of v) if (!Number.isInteger(t) || t < 0 || t >= vocab.n) throw bad(`'${param}' holds ${JSON.stringify(t)}, not a token id in [0, ${vocab.n})`, param);
  return v.slice();
}
const seedU32 = (seed, i) => (Number(BigInt.asUintN(32, BigInt(seed))) + Math.imul(i, 0x9e3779b9)) >>> 0;

// The prompts of a completions request: [{ids, text (for echo)}].
function completionPrompts(b) {
  const p = b.prompt;
  if (typeof p === "string") return [{ ids: vocab.tokenize(p, vocab.addBos) }];
  if (Array.isArray(p) && p.length && p.every((x) => typeof x === "number")) return [{ ids: tokenIds(p, "prompt") }];
  if (Array.isArray(p) && p.length && p.length <= 256 && p.every((x) => typeof x === "string"))
    return p.map((s) => ({ ids: vocab.tokenize(s, vocab.addBos) }));
  if (Array.isArray(p) && p.length && p.length <= 256 && p.every((x) => Array.isArray(x))) return p.map((x) => ({ ids: tokenIds(x, "prompt") }));
  throw bad("'prompt' must be a string, a list of token ids, or a list of either (at most 256)", "prompt");
}

function chatPrompt(b) {
  if (!vocab.template) throw bad("this GGUF has no tokenizer.chat_template: use /v1/completions", "messages");
  const ms = b.messages;
  if (!Array.isArray(ms) || !ms.length) throw bad("'messages' must be a non-empty list", "messages");
  const messages = ms.map((m, i) => {
    if (!isObj(m) || typeof m.role !== "string") throw bad(`messages[${i}] must be {role, content}`, "messages");
    let c = m.content;
    if (Array.isArray(c)) {
      if (c.some((part) => !isObj(part) || part.type !== "text" || typeof part.text !== "string"))
        throw bad(`messages[${i}].content: only text parts are supported`, "messages");
      c = c.map((part) => part.text).join("");
    } else if (c !== null && c !== undefined && typeof c !== "string") throw bad(`messages[${i}].content must be a string or text parts`, "messages");
    return { ...m, content: c ?? null };
  });
  if (b.tools !== undefined && b.tools !== null && !(Array.isArray(b.tools) && !b.tools.length))
    throw bad("tools are not supported", "tools");
  const kw = isObj(b.chat_template_kwargs) ? b.chat_template_kwargs : {};
  const tok = (id) => (id === null ? "" : vocab.tokens[id]);
  let text;
  try {
    text = new Template(vocab.template).render({
      ...kw, messages, add_generation_prompt: bool(b, "add_generation_prompt", true),
      bos_token: tok(vocab.bos), eos_token: tok(vocab.eos),
    });
  } catch (e) {
    throw bad(`the chat template failed on these messages: ${e.message}`, "messages");
  }
  return [{ ids: vocab.tokenize(text, false) }];
}

const REFUSED = [["suffix", (v) => v !== null, "suffix is not supported"],
  ["best_of", (v, b) => v !== null && v !== (b.n ?? 1), "best_of other than n is not supported"],
  ["presence_penalty", (v) => v !== null && v !== 0, "presence_penalty is not supported"],
  ["frequency_penalty", (v) => v !== null && v !== 0, "frequency_penalty is not supported"],
  ["repetition_penalty", (v) => v !== null && v !== 1, "repetition_penalty is not supported"],
  ["use_beam_search", (v) => v === true, "beam search is not supported"]];

// A request body -> {prompts, jobs' common spec, n, stream, ...}. Throws ApiError.
async function parseRequest(b, chat) {
  if (!isObj(b)) throw bad("the body must be a JSON object");
  if (b.model !== undefined && b.model !== null && b.model !== MODEL_NAME)
    throw new ApiError(404, `The model \`${String(b.model).slice(0, 200)}\` does not exist.`, "model");
  for (const [k, test, msg] of REFUSED) if (b[k] !== undefined && test(b[k], b)) throw bad(msg, k);
  const prompts = chat ? chatPrompt(b) : completionPrompts(b);
  const n = num(b, "n", { lo: 1, hi: 64, int: true, def: 1 });
  const temperature = num(b, "temperature", { lo: 0, hi: 100, def: 1 });
  const topP = num(b, "top_p", { lo: 1e-9, hi: 1, def: 1 });
  let topK = num(b, "top_k", { lo: -1, hi: vocab.n, int: true, def: 0 });
  if (topK < 0) topK = 0;
  const minP = num(b, "min_p", { lo: 0, hi: 1, def: 0 });
  const seed = b.seed === undefined || b.seed === null ? null : num(b, "seed", { lo: -(2 ** 63), hi: 2 ** 64, int: true });
  if (seed === null && n > 1 && temperature === 0) { /* greedy choices are equal; allowed */ }
  let lpK = -1, echo = false;
  if (chat) {
    if (bool(b, "logprobs", false)) lpK = num(b, "top_logprobs", { lo: 0, hi: MAX_LOGPROBS, int: true, def: 0 });
    else if (b.top_logprobs !== undefined && b.top_logprobs !== null) throw bad("top_logprobs needs logprobs: true", "top_logprobs");
  } else {
    const v = num(b, "logprobs", { lo: 0, hi: MAX_LOGPROBS, int: true, def: null });
    if (v !== null) lpK = v;
    echo = bool(b, "echo", false);
  }
  const plK = num(b, "prompt_logprobs", { lo: 0, hi: MAX_LOGPROBS, int: true, def: null });
  const maxKey = chat && b.max_completion_tokens !== undefined && b.max_completion_tokens !== null ? "max_completion_tokens" : "max_tokens";
  const maxAsked = num(b, maxKey, { lo: 0, hi: 1 << 30, int: true, def: null });
  const longest = Math.max(...prompts.map((p) => p.ids.length));
  if (longest >= MAX_LEN && !(longest === MAX_LEN && maxAsked === 0))
    throw bad(`This model's maximum context length is ${MAX_LEN} tokens. However, your prompt has ${longest} tokens. Please reduce the length of the prompt.`, "prompt");
  const maxTokens = maxAsked ?? (chat ? MAX_LEN - longest : Math.min(16, MAX_LEN - longest));
  if (longest + maxTokens > MAX_LEN)
    throw bad(`This model's maximum context length is ${MAX_LEN} tokens. However, you requested ${longest + maxTokens} tokens ` +
              `(${longest} in the prompt, ${maxTokens} in the completion). Please reduce the length of the prompt or completion.`, maxKey);
  const minTokens = num(b, "min_tokens", { lo: 0, hi: maxTokens, int: true, def: 0 });
  let stops = b.stop ?? [];
  if (typeof stops === "string") stops = [stops];
  if (!Array.isArray(stops) || stops.length > 16 || stops.some((s) => typeof s !== "string" || !s.length || s.length > 256))
    throw bad("'stop' must be a string or a list of at most 16 non-empty strings (<= 256 characters)", "stop");
  const stopIds = b.stop_token_ids ?? [];
  if (!Array.isArray(stopIds) || stopIds.some((t) => !Number.isInteger(t) || t < 0 || t >= vocab.n))
    throw bad(`'stop_token_ids' must be a list of token ids in [0, ${vocab.n})`, "stop_token_ids");
  const logitBias = new Map();
  if (b.logit_bias !== undefined && b.logit_bias !== null) {
    if (!isObj(b.logit_bias)) throw bad("'logit_bias' must be an object {token id: bias}", "logit_bias");
    for (const [k, v] of Object.entries(b.logit_bias)) {
      const id = Number(k);
      if (!Number.isInteger(id) || id < 0 || id >= vocab.n || typeof v !== "number" || !(v >= -100 && v <= 100))
        throw bad(`'logit_bias' entry ${JSON.stringify(k)}: a token id with a bias in [-100, 100] is required`, "logit_bias");
      logitBias.set(id, v);
    }
  }
  const so = isObj(b.stream_options) ? b.stream_options : {};
  const stream = bool(b, "stream", false);
  const constraint = await constraintOf(b, chat);
  const baseSeed = seed ?? crypto.randomInt(0, 2 ** 32);
  return {
    chat, prompts, n, stream, echo, lpK, plK, includeUsage: so.include_usage === true,
    returnIds: bool(b, "return_token_ids", false), idNames: bool(b, "return_tokens_as_token_ids", false),
    spec: (p, i) => ({
      prompt: p.ids, maxTokens, minTokens,
      sampling: { temperature, topK, topP, minP, seed: seedU32(baseSeed, i) },
      logprobs: lpK, promptLogprobs: Math.max(plK ?? -1, echo && lpK >= 0 ? lpK : -1),
      stops, maxStop: Math.max(0, ...stops.map((s) => s.length)), stopIds: new Set(stopIds),
      ignoreEos: bool(b, "ignore_eos", false), includeStop: bool(b, "include_stop_str_in_output", false),
      skipSpecial: bool(b, "skip_special_tokens", true), logitBias, constraint, seq: jobSeq++,
    }),
  };
}

// ---- responses ----
const tokName = (r, t) => (r.idNames ? `token_id:${t}` : vocab.display(t));
const round = (x) => x; // logprobs are reported at full double precision
function topDict(r, e, chosen) {
  const d = {};
  for (const [id, lp] of e.top) d[tokName(r, id)] = round(lp);
  if (chosen !== undefined && !(tokName(r, chosen) in d)) d[tokName(r, chosen)] = round(e.lp);
  return d;
}
// completions logprobs of tokens [from, to) of job j (echo: the prompt first)
function completionLogprobs(r, j, from, to, withPrompt, promptText) {
  const L = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  if (withPrompt) {
    const d = utf8();
    let off = 0;
    j.prompt.forEach((t, i) => {
      const e = j.promptLp[i];
      L.tokens.push(tokName(r, t));
      L.token_logprobs.push(e ? round(e.lp) : null);
      L.top_logprobs.push(e ? topDict(r, e, t) : null);
      L.text_offset.push(off);
      off += d.decode(vocab.outBytes(t, j.skipSpecial), { stream: true }).length;
    });
  }
  const base = withPrompt ? promptText.length : 0;
  for (let i = from; i < to; i++) {
    const t = j.out[i], e = j.outLp[i];
    L.tokens.push(tokName(r, t));
    L.token_logprobs.push(round(e.lp));
    L.top_logprobs.push(topDict(r, e, t));
    L.text_offset.push(base + j.offsets[i]);
  }
  return L;
}
function chatLogprobs(r, j, from, to) {
  const content = [];
  for (let i = from; i < to; i++) {
    const t = j.out[i], e = j.outLp[i];
    content.push({
      token: tokName(r, t), logprob: round(e.lp), bytes: Array.from(vocab.piece(t)),
      top_logprobs: e.top.map(([id, lp]) => ({ token: tokName(r, id), logprob: round(lp), bytes: Array.from(vocab.piece(id)) })),
    });
  }
  return { content };
}
// vLLM's prompt_logprobs: [null, {id: {logprob, rank, decoded_token}}, ...]; rank is known for
// the top k (1..k) and null for a prompt token outside them
function promptLogprobs(r, j) {
  return j.prompt.map((t, i) => {
    const e = j.promptLp[i];
    if (!e) return null;
    const d = {};
    e.top.forEach(([id, lp], k) => (d[id] = { logprob: round(lp), rank: k + 1, decoded_token: vocab.display(id) }));
    if (!(t in d)) d[t] = { logprob: round(e.lp), rank: null, decoded_token: vocab.display(t) };
    return d;
  });
}
function usageOf(r, jobs) {
  const prompt = r.prompts.reduce((a, p) => a + p.ids.length, 0);
  const completion = jobs.reduce((a, j) => a + j.out.length, 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}
const stopReasonOf = (j) => (j.finish === "stop" ? j.stopReason : null);
const finishOf = (j) => (j.finish === "abort" || j.finish === "error" ? "abort" : j.finish);

function json(res, status, body, extra = {}) {
  if (res.headersSent) return;
  const s = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(s), ...extra });
  res.end(s);
}

async function handleGenerate(req, res, b, chat) {
  const r = await parseRequest(b, chat);
  const id = (chat ? "chatcmpl-" : "cmpl-") + crypto.randomBytes(12).toString("hex");
  const created = Math.floor(Date.now() / 1000);
  const jobs = [];
  r.prompts.forEach((p, pi) => {
    p.echoText = r.echo ? vocab.render(p.ids, true) : "";
    for (let i = 0; i < r.n; i++) {
      const j = new Job(r.spec(p, i));
      j.index = pi * r.n + i;
      j.promptRef = p;
      jobs.push(j);
    }
  });
  let closed = false;
  res.on("close", () => {
    if (!res.writableFinished) {
      closed = true;
      for (const j of jobs) j.cancelled = true;
      void engine.run();
    }
  });
  const object = chat ? "chat.completion" : "text_completion";
  if (!r.stream) {
    engine.submit(jobs);
    await Promise.all(jobs.map((j) => j.done));
    if (closed) return;
    const failed = jobs.find((j) => j.finish === "error");
    if (failed) throw new ApiError(500, `generation failed: ${failed.error}`);
    const choices = jobs.map((j) => {
      const c = { index: j.index };
      if (chat) {
        c.message = { role: "assistant", content: j.text };
        c.logprobs = r.lpK >= 0 ? chatLogprobs(r, j, 0, j.out.length) : null;
      } else {
        c.text = j.promptRef.echoText + j.text;
        c.logprobs = r.lpK >= 0 ? completionLogprobs(r, j, 0, j.out.length, r.echo, j.promptRef.echoText) : null;
      }
      c.finish_reason = finishOf(j);
      c.stop_reason = stopReasonOf(j);
      if (!chat && r.plK !== null) c.prompt_logprobs = promptLogprobs(r, j);
      if (r.returnIds) { c.token_ids = j.out.slice(); if (!chat) c.prompt_token_ids = j.prompt.slice(); }
      return c;
    });
    const body = { id, object, created, model: MODEL_NAME, choices, usage: usageOf(r, jobs) };
    if (chat && r.plK !== null) body.prompt_logprobs = promptLogprobs(r, jobs[0]);
    if (chat && r.returnIds) body.prompt_token_ids = jobs[0].prompt.slice();
    return json(res, 200, body);
  }
  // streaming: SSE, one event per choice as tokens arrive (text held back while it could still
  // become a stop string), the finish event, usage if asked, [DONE]
  engine.room(jobs.length);
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive" });
  const send = (o) => { if (!closed) res.write(`data: ${JSON.stringify(o)}\n\n`); };
  const chunk = (choice) => {
    const o = { id, object: chat ? "chat.completion.chunk" : "text_completion", created, model: MODEL_NAME, choices: [choice] };
    if (r.includeUsage) o.usage = null;
    return o;
  };
  const flush = (j) => {
    const st = j.sst ?? (j.sst = { tok: 0, text: 0, first: true });
    const end = j.ended;
    const safe = end ? j.text.length : Math.max(st.text, j.text.length - Math.max(0, j.maxStop - 1));
    const ntok = j.out.length;
    if (!end && ntok === st.tok && safe === st.text && !st.first) return;
    const c = { index: j.index };
    const delta = j.text.slice(st.text, safe);
    if (chat) {
      c.delta = st.first ? { role: "assistant", content: delta } : delta || !end ? { content: delta } : {};
      c.logprobs = r.lpK >= 0 ? chatLogprobs(r, j, st.tok, ntok) : null;
    } else {
      c.text = (st.first ? j.promptRef.echoText : "") + delta;
      c.logprobs = r.lpK >= 0 ? completionLogprobs(r, j, st.tok, ntok, st.first && r.echo, j.promptRef.echoText) : null;
      if (st.first && r.plK !== null) c.prompt_logprobs = promptLogprobs(r, j);
    }
    if (r.returnIds) {
      c.token_ids = j.out.slice(st.tok, ntok);
      if (st.first && !chat) c.prompt_token_ids = j.prompt.slice();
    }
    c.finish_reason = end ? finishOf(j) : null;
    if (end) c.stop_reason = stopReasonOf(j);
    st.first = false;
    st.tok = ntok;
    st.text = safe;
    send(chunk(c));
  };
  for (const j of jobs) j.listener = flush;
  engine.submit(jobs);
  await Promise.all(jobs.map((j) => j.done));
  const failed = jobs.find((j) => j.finish === "error");
  if (failed) send(errorBody(500, `generation failed: ${failed.error}`));
  if (r.includeUsage) send({ id, object: chat ? "chat.completion.chunk" : "text_completion", created, model: MODEL_NAME, choices: [], usage: usageOf(r, jobs) });
  if (!closed) res.end("data: [DONE]\n\n");
}

// ---- HTTP ----
function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0, over = false;
    req.on("data", (c) => {
      if (over) return;
      size += c.length;
      if (size > MAX_BODY) { over = true; reject(new ApiError(413, `the request body is larger than ${MAX_BODY} bytes`)); return; }
      parts.push(c);
    });
    req.on("end", () => { if (!over) resolve(Buffer.concat(parts)); });
    req.on("error", reject);
  });
}
async function jsonBody(req) {
  const raw = await readBody(req);
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch (e) {
    throw bad(`the body is not valid JSON: ${e.message}`);
  }
}
function authorized(req) {
  if (!API_KEY) return true;
  const h = req.headers.authorization ?? "";
  const want = Buffer.from(`Bearer ${API_KEY}`), got = Buffer.from(h);
  return got.length === want.length && crypto.timingSafeEqual(got, want);
}
function modelsBody() {
  return {
    object: "list",
    data: [{ id: MODEL_NAME, object: "model", created: STARTED, owned_by: "vouch", root: ROOT, parent: null,
             max_model_len: MAX_LEN, vocab_size: vocab.n, permission: [] }],
  };
}
function metricsText() {
  const m = [`# TYPE vllm:num_requests_running gauge`, `vllm:num_requests_running ${engine.active}`,
             `# TYPE vllm:num_requests_waiting gauge`, `vllm:num_requests_waiting ${engine.queue.length}`,
             `# TYPE vllm:prompt_tokens_total counter`, `vllm:prompt_tokens_total ${stats.prompt}`,
             `# TYPE vllm:generation_tokens_total counter`, `vllm:generation_tokens_total ${stats.generation}`,
             `# TYPE vllm:request_success_total counter`];
  for (const [k, v] of Object.entries(stats.finished)) m.push(`vllm:request_success_total{finished_reason="${k}"} ${v}`);
  return m.join("\n") + "\n";
}
const STARTED = Math.floor(Date.now() / 1000);
const ROUTES = {
  "GET /health": async (req, res) => { res.writeHead(200, { "Content-Length": 0 }); res.end(); },
  "GET /version": async (req, res) => json(res, 200, { version: SERVER_VERSION, engine: ENGINE, model: MODEL_NAME }),
  "GET /v1/models": async (req, res) => json(res, 200, modelsBody()),
  "GET /metrics": async (req, res) => { const s = metricsText(); res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" }); res.end(s); },
  "POST /v1/completions": async (req, res) => handleGenerate(req, res, await jsonBody(req), false),
  "POST /v1/chat/completions": async (req, res) => handleGenerate(req, res, await jsonBody(req), true),
  "POST /tokenize": async (req, res) => {
    const b = await jsonBody(req);
    if (!isObj(b)) throw bad("the body must be a JSON object");
    const ids = b.messages ? chatPrompt(b)[0].ids
      : typeof b.prompt === "string" ? vocab.tokenize(b.prompt, bool(b, "add_special_tokens", true) && vocab.addBos)
      : (() => { throw bad("'prompt' (a string) or 'messages' is required", "prompt"); })();
    json(res, 200, { tokens: ids, count: ids.length, max_model_len: MAX_LEN });
  },
  "POST /detokenize": async (req, res) => {
    const b = await jsonBody(req);
    if (!isObj(b) || !Array.isArray(b.tokens)) throw bad("'tokens' (a list of token ids) is required", "tokens");
    json(res, 200, { prompt: vocab.render(b.tokens.length ? tokenIds(b.tokens, "tokens") : [], false) });
  },
};
const GUARDED = (p) => p.startsWith("/v1/") || p === "/tokenize" || p === "/detokenize";

const server = http.createServer(async (req, res) => {
  const url = (req.url ?? "/").split("?")[0];
  try {
    if (GUARDED(url) && !authorized(req)) throw new ApiError(401, "Unauthorized: a valid 'Authorization: Bearer <key>' header is required");
    const route = ROUTES[`${req.method} ${url}`];
    if (!route) {
      const known = Object.keys(ROUTES).some((k) => k.endsWith(" " + url));
      throw new ApiError(known ? 405 : 404, known ? `${req.method} is not allowed on ${url}` : `no route ${url}`);
    }
    await route(req, res);
  } catch (e) {
    const status = e instanceof ApiError ? e.status : 500;
    if (status === 500) console.error(`server.mjs: ${req.method} ${url}: ${e?.stack ?? e}`);
    if (res.headersSent) {
      if (!res.writableEnded) res.end(`data: ${JSON.stringify(errorBody(status, e.message))}\n\ndata: [DONE]\n\n`);
    } else {
      json(res, status, errorBody(status, e.message ?? String(e), e.param ?? null), status === 413 ? { Connection: "close" } : {});
    }
  }
});
server.requestTimeout = 0; // generation can take long; clients time out themselves
server.keepAliveTimeout = 30_000;
server.on("clientError", (err, socket) => { if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"); });
server.listen(PORT, args.host, () => {
  const a = server.address();
  console.log(`server.mjs: serving ${MODEL_NAME} (${args.gguf}, vocab ${vocab.n}${vocab.hasText ? ", with its tokenizer" : ", ids only"}${vocab.template ? ", chat template" : ""}) ` +
              `on http://${a.address}:${a.port} with ${ENGINE}, ${PARALLEL} sequences x ${MAX_LEN} tokens, batch ${BATCH}, ${context.currentThreads} threads`);
});
const shutdown = () => { server.close(); process.exit(0); };
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
