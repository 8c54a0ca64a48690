#!/usr/bin/env python3
"""Writes a small dataset in the public openai/mrcr row format (JSONL), made here from a seed: long
synthetic chat histories where the user asks for pieces of writing ("write a poem about tapirs") and
the assistant answers with generated text; 2, 4 or 8 of the asks are identical (the needles), and the
last user message asks for the k-th of them with a random string prepended.

  python3 scripts/mrcr_synth.py --out mrcr-small.jsonl [--rows 24] [--seed 1] [--min-chars 2000] [--max-chars 60000]

Each row: prompt (a JSON-encoded string of the messages), answer (the random string + the k-th needle's
answer), random_string_to_prepend, n_needles, desired_msg_index (the needle's index in the messages),
total_messages, n_chars (characters of all message contents). Rows cycle through 2, 4 and 8 needles,
with their lengths spread evenly on a log scale between --min-chars and --max-chars. Used by
tests/cli/test_eval_mrcr_dataset.sh; nothing here comes from the public dataset.
"""
import argparse, json, math, random

WORDS = ("amber basalt cedar delta ember fjord glacier harbor island juniper kestrel lagoon meadow nectar "
         "orchard prairie quartz river summit thicket upland valley willow yonder zephyr anchor beacon canyon "
         "dune estuary fern grove heath inlet jetty knoll ledge marsh notch oasis pebble quarry reef shoal "
         "tundra vale wharf atoll bramble cove").split()
FORMS = ["poem", "short story", "blog post", "riddle", "haiku", "letter", "song", "essay"]
TOPICS = ["tapirs", "lighthouses", "glaciers", "bicycles", "comets", "owls", "bridges", "tea", "volcanoes",
          "libraries", "otters", "clocks"]


def text(rng, n_words):
    """n_words of lowercase prose in sentences of 6 to 14 words."""
    out, left = [], n_words
    while left > 0:
        k = min(left, rng.randint(6, 14))
        s = " ".join(rng.choice(WORDS) for _ in range(k))
        out.append(s[0].upper() + s[1:] + ".")
        left -= k
    return " ".join(out)


def ordinal(k):
    return "%d%s" % (k, "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th"))


def row(rng, n_needles, target_chars):
    form, topic = rng.choice(FORMS), rng.choice(TOPICS)
    needle_ask = "write a %s about %s" % (form, topic)
    msgs, needles = [], []
    # the needles' places among the turns, the rest distractors (other forms or topics)
    n_turns = max(n_needles + 2, target_chars // 700)
    places = sorted(rng.sample(range(n_turns), n_needles))
    words_per_answer = max(20, (target_chars // n_turns - 40) // 7)
    for t in range(n_turns):
        if t in places:
            ask = needle_ask
        else:
            while True:
                ask = "write a %s about %s" % (rng.choice(FORMS), rng.choice(TOPICS))
                if ask != needle_ask:
                    break
        msgs.append({"role": "user", "content": ask})
        reply = text(rng, rng.randint(words_per_answer // 2, words_per_answer * 3 // 2))
        if ask == needle_ask:
            needles.append(len(msgs))
        msgs.append({"role": "assistant", "content": reply})
    k = rng.randint(1, n_needles)
    prefix = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(10))
    msgs.append({"role": "user", "content": "Prepend %s to the %s (1 indexed) %s about %s. Do not include any other "
                 "text in your response." % (prefix, ordinal(k), form, topic)})
    idx = needles[k - 1]
    return {"prompt": json.dumps(msgs), "answer": prefix + msgs[idx]["content"], "random_string_to_prepend": prefix,
            "n_needles": n_needles, "desired_msg_index": idx, "total_messages": len(msgs),
            "n_chars": sum(len(m["content"]) for m in msgs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-chars", type=int, default=2000)
    ap.add_argument("--max-chars", type=int, default=60000)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with open(a.out, "w") as f:
        for i in range(a.rows):
            frac = i / max(1, a.rows - 1)
            target = int(math.exp(math.log(a.min_chars) + frac * (math.log(a.max_chars) - math.log(a.min_chars))))
            f.write(json.dumps(row(rng, (2, 4, 8)[i % 3], target)) + "\n")


if __name__ == "__main__":
    main()
