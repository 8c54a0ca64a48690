# A fake OpenAI-compatible text server for the MRCR dataset tests (loopback only): it answers chat
# completions of MRCR-format conversations (scripts/mrcr_synth.py) by reading the conversation: the
# last user message asks to prepend a string to the k-th (1 indexed) "<form> about <topic>", and the
# answer is that string and the k-th assistant reply that followed "write a <form> about <topic>".
# usage.prompt_tokens counts the conversation as (characters of every content) // 4 + 4 per message.
#
# The URL's first path segment picks the behaviour (argv[1]: the file its port is written to):
#   /good          the correct answer, finish_reason "stop"
#   /noprefix      the correct answer without the random string (every grade 0)
#   /trunc         the first half of the correct answer, finish_reason "length"
#   /wrongpastN    past N prompt tokens, the wrong needle (the next one) with the right prefix
#   /ctxN          past N prompt tokens, HTTP 400 "This model's maximum context length is N tokens..."
#   /flaky         every third request HTTP 500
#   /other         as /good, but /v1/models gives another root (not the same checkpoint)
#   /otherlen      as /good, but /v1/models gives another max_model_len
#   /noversion     as /good, but GET /version answers 404
# A request with "stream": true is answered as SSE (the text in pieces of 40 characters, a usage event
# when stream_options.include_usage, then [DONE]). Every request body is appended as one JSON line to
# argv[2] when given (what the tests check the requests by), and its Authorization header (or "(none)")
# as one line to argv[2] + ".auth".
import itertools, json, re, sys, threading

from fake_http import TextFake, serve

count, lock = itertools.count(), threading.Lock()
ASK = re.compile(r"Prepend (\S+) to the (\d+)(?:st|nd|rd|th) \(1 indexed\) (.+) about (.+?)\. Do not include")


def answer(msgs):
    """The correct answer and the one with the wrong needle, for the conversation msgs."""
    m = ASK.search(msgs[-1]["content"])
    if not m:
        return "I cannot tell which piece you mean.", "I cannot tell which piece you mean."
    prefix, k, form, topic = m.group(1), int(m.group(2)), m.group(3), m.group(4)
    ask = "write a %s about %s" % (form, topic)
    found = [msgs[i + 1]["content"] for i in range(len(msgs) - 1)
             if msgs[i]["role"] == "user" and msgs[i]["content"] == ask and msgs[i + 1]["role"] == "assistant"]
    if k > len(found):
        return prefix, prefix
    return prefix + found[k - 1], prefix + found[k % len(found)]


def tokens(msgs):
    return sum(len(m["content"]) for m in msgs) // 4 + 4 * len(msgs)


class H(TextFake):
    model_id = "fake-mrcr"

    def do_POST(self):
        raw = self.read_body(sys.argv[2] if len(sys.argv) > 2 else None)
        req = json.loads(raw)
        mode = self.mode()
        if not self.path.endswith("/v1/chat/completions"):
            return self.send(404, json.dumps({"error": {"message": "only chat completions here"}}))
        msgs = req["messages"]
        n_tok = tokens(msgs)
        good, wrong = answer(msgs)
        text, finish = good, "stop"
        if mode == "noprefix":
            m = ASK.search(msgs[-1]["content"])
            text = good[len(m.group(1)):] if m else good
        elif mode == "trunc":
            text, finish = good[: len(good) // 2], "length"
        elif mode.startswith("wrongpast") and n_tok > int(mode[9:]):
            text = wrong
        elif mode.startswith("ctx") and n_tok > int(mode[3:]):
            return self.send(400, json.dumps({"object": "error", "message": "This model's maximum context length is %s "
                                              "tokens. However, you requested %d tokens." % (mode[3:], n_tok),
                                              "type": "BadRequestError", "code": 400}))
        elif mode == "flaky":
            with lock:
                k = next(count)
            if k % 3 == 2:
                return self.send(500, json.dumps({"error": {"message": "request %d dropped" % k}}))
        n_out = max(1, len(text) // 4)
        usage = {"prompt_tokens": n_tok, "completion_tokens": n_out, "total_tokens": n_tok + n_out}
        if req.get("stream"):
            ev = [{"id": "c1", "object": "chat.completion.chunk", "model": req["model"],
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
            for i in range(0, len(text), 40):
                ev.append({"id": "c1", "object": "chat.completion.chunk", "model": req["model"],
                           "choices": [{"index": 0, "delta": {"content": text[i:i + 40]}, "finish_reason": None}]})
            ev.append({"id": "c1", "object": "chat.completion.chunk", "model": req["model"],
                       "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            if (req.get("stream_options") or {}).get("include_usage"):
                ev.append({"id": "c1", "object": "chat.completion.chunk", "model": req["model"], "choices": [],
                           "usage": usage})
            body = "".join("data: " + json.dumps(e) + "\n\n" for e in ev) + "data: [DONE]\n\n"
            return self.send(200, body, "text/event-stream")
        self.send(200, json.dumps({"id": "c1", "object": "chat.completion", "model": req["model"],
                                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                "finish_reason": finish}], "usage": usage}))


serve(H, sys.argv[1])
