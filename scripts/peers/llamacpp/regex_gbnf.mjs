// A regular expression (a documented subset) as a llama.cpp GBNF grammar whose language is the
// set of strings the regex matches in full (vLLM's guided_regex semantics: the whole output
// matches). Used by server.mjs for guided_regex / structured_outputs.regex.
//
// Supported: literal characters; escapes \d \w \s \D \W \S (ASCII: [0-9], [A-Za-z0-9_],
// [ \t\n\r\f\v]), \t \n \r \f \v \0, \xHH, \uHHHH, \u{H...}, and a backslash before any
// character that is not a letter or digit; character classes [...] and [^...] with ranges and
// the escapes above (\d \w \s inside, not their negations); . (any character but \n); groups
// (...), (?:...), (?<name>...), (?P<name>...); alternation |; quantifiers * + ? {n} {n,} {n,m}
// (n, m <= 1000), lazy forms (*? etc.: the same language under a full match); ^ as the first
// and $ as the last character. Everything else (backreferences, lookaround, \b, \p{..}, inline
// flags, possessive quantifiers, anchors elsewhere, POSIX classes) is refused with an error
// naming the construct and its offset.

export class RegexError extends Error {}

const MAX_REPEAT = 1000;
const DIGIT = [[0x30, 0x39]];
const WORD = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE = [[0x09, 0x0d], [0x20, 0x20]]; // \t \n \v \f \r and space

// GBNF's spelling of code point c inside "..." or [...].
function gchar(c) {
  if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x20 || c === 0x5f)
    return String.fromCodePoint(c);
  if (c < 0x100) return "\\x" + c.toString(16).padStart(2, "0");
  if (c < 0x10000) return "\\u" + c.toString(16).padStart(4, "0");
  return "\\U" + c.toString(16).padStart(8, "0");
}

export function gbnfLiteral(s) {
  let o = '"';
  for (const ch of s) o += gchar(ch.codePointAt(0));
  return o + '"';
}

function classText(neg, ranges) {
  let o = neg ? "[^" : "[";
  for (const [lo, hi] of ranges) o += lo === hi ? gchar(lo) : gchar(lo) + "-" + gchar(hi);
  return o + "]";
}

// Parses src into an AST: {t: "lit", s} | {t: "cls", neg, ranges} | {t: "seq", items} |
// {t: "alt", items} | {t: "rep", node, min, max (Infinity: none)}.
function parse(src) {
  const cps = Array.from(src, (ch) => ch.codePointAt(0));
  let i = 0;
  const at = () => cps[i];
  const ch = () => (i < cps.length ? String.fromCodePoint(cps[i]) : "");
  const fail = (what) => {
    throw new RegexError(`${what} at offset ${i}: not in the supported regex subset (docs/llama-cpp.md)`);
  };
  const readHex = (n) => {
    let v = 0;
    for (let k = 0; k < n; k++) {
      const d = parseInt(ch(), 16);
      if (!(d >= 0)) fail("a malformed hex escape");
      v = v * 16 + d;
      i++;
    }
    return v;
  };
  // an escape after the backslash: {cp} for a character, {ranges, neg} for a class escape
  const escape = () => {
    const c = ch();
    i++;
    switch (c) {
      case "d": return { ranges: DIGIT, neg: false };
      case "D": return { ranges: DIGIT, neg: true };
      case "w": return { ranges: WORD, neg: false };
      case "W": return { ranges: WORD, neg: true };
      case "s": return { ranges: SPACE, neg: false };
      case "S": return { ranges: SPACE, neg: true };
      case "t": return { cp: 9 };
      case "n": return { cp: 10 };
      case "r": return { cp: 13 };
      case "f": return { cp: 12 };
      case "v": return { cp: 11 };
      case "0": return { cp: 0 };
      case "x": return { cp: readHex(2) };
      case "u":
        if (ch() === "{") {
          i++;
          let v = 0, n = 0;
          while (ch() !== "}") {
            const d = parseInt(ch(), 16);
            if (!(d >= 0) || ++n > 6) fail("a malformed \\u{...} escape");
            v = v * 16 + d;
            i++;
          }
          i++;
          if (v > 0x10ffff) fail("a code point above U+10FFFF");
          return { cp: v };
        }
        return { cp: readHex(4) };
      case "":
        i--;
        return fail("a trailing backslash");
      default:
        if (/[A-Za-z0-9]/.test(c)) {
          i--;
          const names = { b: "\\b (word boundary)", B: "\\B", p: "\\p{...} (Unicode property)", P: "\\P{...}", k: "\\k<name> (backreference)",
                          A: "\\A", z: "\\z", Z: "\\Z", G: "\\G", c: "\\c (control escape)" };
          return fail(names[c] ?? (/[1-9]/.test(c) ? `\\${c} (backreference)` : `the escape \\${c}`));
        }
        return { cp: c.codePointAt(0) };
    }
  };
  const parseClass = () => { // after '['
    const start = i - 1;
    let neg = false;
    if (ch() === "^") { neg = true; i++; }
    const ranges = [];
    let first = true;
    for (;;) {
      if (i >= cps.length) { i = start; fail("an unterminated character class"); }
      let c = ch();
      if (c === "]" && !first) { i++; break; }
      first = false;
      if (c === "[" && cps[i + 1] === 0x3a) fail("a POSIX class [:...:]");
      let lo;
      if (c === "\\") {
        i++;
        const e = escape();
        if (e.ranges) {
          if (e.neg) { i -= 2; fail("a negated class escape (\\D \\W \\S) inside [...]"); }
          ranges.push(...e.ranges);
          continue;
        }
        lo = e.cp;
      } else {
        lo = at();
        i++;
      }
      if (ch() === "-" && i + 1 < cps.length && cps[i + 1] !== 0x5d) {
        i++;
        let hi;
        if (ch() === "\\") {
          i++;
          const e = escape();
          if (e.ranges) fail("a class escape as the end of a range");
          hi = e.cp;
        } else {
          hi = at();
          i++;
        }
        if (hi < lo) fail("a range whose end precedes its start");
        ranges.push([lo, hi]);
      } else {
        ranges.push([lo, lo]);
      }
    }
    if (!ranges.length) fail("an empty character class");
    return { t: "cls", neg, ranges };
  };
  const parseAtom = () => {
    const c = ch();
    if (c === "(") {
      i++;
      if (ch() === "?") {
        i++;
        const n = ch();
        if (n === ":") i++;
        else if (n === "<" && cps[i + 1] !== 0x3d && cps[i + 1] !== 0x21) { // (?<name>
          while (i < cps.length && ch() !== ">") i++;
          i++;
        } else if (n === "P" && cps[i + 1] === 0x3c) { // (?P<name>
          while (i < cps.length && ch() !== ">") i++;
          i++;
        } else if (n === "=" || n === "!" || n === "<") { i -= 2; fail("lookaround (?= (?! (?<= (?<!"); }
        else { i -= 2; fail("the group construct (?" + n); }
      }
      const inner = parseAlt();
      if (ch() !== ")") fail("an unbalanced '('");
      i++;
      return inner;
    }
    if (c === "[") { i++; return parseClass(); }
    if (c === ".") { i++; return { t: "cls", neg: true, ranges: [[10, 10]] }; }
    if (c === "\\") {
      i++;
      const e = escape();
      return e.ranges ? { t: "cls", neg: e.neg, ranges: e.ranges } : { t: "lit", s: String.fromCodePoint(e.cp) };
    }
    if (c === "^") fail("'^' not at the start of the pattern");
    if (c === "$") fail("'$' not at the end of the pattern");
    if (c === "*" || c === "+" || c === "?") fail("a quantifier with nothing to repeat");
    i++;
    return { t: "lit", s: c };
  };
  // a quantifier at i, or null ('{' that is not one is a literal, as in PCRE)
  const quant = () => {
    const c = ch();
    let q = null;
    if (c === "*") q = [0, Infinity];
    else if (c === "+") q = [1, Infinity];
    else if (c === "?") q = [0, 1];
    else if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(String.fromCodePoint(...cps.slice(i, i + 24)));
      if (!m) return null;
      const lo = +m[1], hi = m[2] === undefined ? lo : m[3] === "" ? Infinity : +m[3];
      if (lo > MAX_REPEAT || (hi !== Infinity && hi > MAX_REPEAT)) fail(`a repetition count above ${MAX_REPEAT}`);
      if (hi < lo) fail("a repetition {n,m} with m < n");
      i += m[0].length - 1;
      q = [lo, hi];
    } else return null;
    i++;
    if (ch() === "?") i++; // lazy: the same set of full matches
    else if (ch() === "+") fail("a possessive quantifier");
    return q;
  };
  const parseSeq = () => {
    const items = [];
    while (i < cps.length && ch() !== "|" && ch() !== ")") {
      if (ch() === "$" && i === cps.length - 1) { i++; break; }
      let node = parseAtom();
      let q;
      while ((q = quant())) node = { t: "rep", node, min: q[0], max: q[1] };
      items.push(node);
    }
    return { t: "seq", items };
  };
  const parseAlt = () => {
    const items = [parseSeq()];
    while (ch() === "|") { i++; items.push(parseSeq()); }
    return items.length === 1 ? items[0] : { t: "alt", items };
  };
  if (ch() === "^") i++;
  const ast = parseAlt();
  if (i < cps.length) fail("an unbalanced ')'");
  return ast;
}

function emit(n) {
  switch (n.t) {
    case "lit": return gbnfLiteral(n.s);
    case "cls": return classText(n.neg, n.ranges);
    case "seq": {
      if (!n.items.length) return '""';
      // adjacent literals merge into one string
      const parts = [];
      for (const it of n.items) {
        if (it.t === "lit" && parts.length && parts.at(-1).t === "lit") parts.at(-1).s += it.s;
        else parts.push(it.t === "lit" ? { t: "lit", s: it.s } : it);
      }
      return parts.map((p) => (p.t === "alt" ? `(${emit(p)})` : emit(p))).join(" ");
    }
    case "alt": return n.items.map(emit).join(" | ");
    case "rep": {
      const inner = n.node.t === "cls" || (n.node.t === "lit" && [...n.node.s].length === 1) ? emit(n.node) : `(${emit(n.node)})`;
      if (n.min === 0 && n.max === Infinity) return inner + "*";
      if (n.min === 1 && n.max === Infinity) return inner + "+";
      if (n.min === 0 && n.max === 1) return inner + "?";
      return `${inner}{${n.min},${n.max === Infinity ? "" : n.max}}`;
    }
  }
  throw new Error("regex_gbnf: unknown node");
}

// The GBNF text (root rule "root") for a full match of the regex src. Throws RegexError.
export function regexToGbnf(src) {
  if (typeof src !== "string") throw new RegexError("the regex must be a string");
  if (src.length > 4096) throw new RegexError("a regex longer than 4096 characters is not supported");
  return `root ::= ${emit(parse(src))}\n`;
}
