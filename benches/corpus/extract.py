#!/usr/bin/env python3
"""Extracts the labelled cases of public secret scanners' own test suites into cases.jsonl.

Sources (the commits read are written into cases.jsonl's first line and checked on re-runs):
  gitleaks       cmd/generate/config/rules/*.go   each rule's `tps` (positives) and `fps` (negatives)
  detect-secrets tests/plugins/*_test.py          pytest parametrize tables (line, should_flag)
                 test_data/files/file_with_no_secrets.py  (a negative, whole file)
  ripsecrets     test/one_per_line/*, test/one_per_file/* (positives), test/none (negatives)

No secret-looking literal is written: every generated part (gitleaks' `secrets.NewSecret(regex)`)
becomes a generator spec, and in literal positives every run that looks random is replaced by a
spec of the same character class and length (known prefixes such as `ghp_` or `AKIA` kept).
Negatives keep their text (placeholders are the point of a negative) except runs that look
random, which are re-randomised the same way; a negative that was an exact published value (a
vendor's documented sample key allowed by exact value, an allowlist pragma) and would become a
real-looking key is dropped (listed with its reason in the first line's "dropped"); one with a
structural reason (length, case, a bad character, a placeholder) stays. The benchmark (benches/recall.rs) expands the
specs with a fresh seed on each run.

Case (one JSON object per line):
  id, source (tool:path[:rule]), family (vendor id, or generic / keyword / entropy),
  vendor_format (the value shows its vendor by itself: a prefix or shape; false for gitleaks'
  rules that need the vendor's name next to a bare random value, and for the generic families),
  label (positive / negative), kind (value: a token to embed in every context; text: a line or
  file published as is), key (identifier for the assignment contexts), file (text cases: the
  file name to write it under), template (list of literal strings and {"c": ranges, "n": count}).

Usage: extract.py GITLEAKS_GIT DETECT_SECRETS_GIT RIPSECRETS_GIT > benches/corpus/cases.jsonl
(each a git directory, e.g. a bare clone; files are read with `git show HEAD:path`).
"""

import ast
import base64
import json
import re
import subprocess
import sys

GENERIC_FAMILIES = {"generic", "keyword", "entropy"}


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def show(repo, path):
    return git(repo, "show", "HEAD:" + path)


def ls(repo, path):
    return [p for p in git(repo, "ls-tree", "-r", "--name-only", "HEAD", path).splitlines()]


# ---------------------------------------------------------------- character sets and templates

PRINTABLE = [chr(c) for c in range(0x21, 0x7F)]
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def ranges(chars):
    """A set of characters as a compact ranges string (`0-9a-f`); `-` goes last."""
    cs = sorted(set(chars) - {"-"}, key=ord)
    out, i = [], 0
    while i < len(cs):
        j = i
        while j + 1 < len(cs) and ord(cs[j + 1]) == ord(cs[j]) + 1:
            j += 1
        out.append(cs[i] if j == i else cs[i] + cs[j] if j == i + 1 else cs[i] + "-" + cs[j])
        i = j + 1
    return "".join(out) + ("-" if "-" in chars else "")


def gen(chars, n):
    return {"c": ranges(chars), "n": n}


def merge(segs):
    out = []
    for s in segs:
        if isinstance(s, str) and out and isinstance(out[-1], str):
            out[-1] += s
        elif s != "":
            out.append(s)
    return out


def shape_class(run):
    """The generator class of a run of letters and digits: what kind of characters it holds."""
    has_d = any(c.isdigit() for c in run)
    has_l = any(c.islower() for c in run)
    has_u = any(c.isupper() for c in run)
    if has_d and not has_u and all(c in "0123456789abcdef" for c in run) and has_l:
        return "0123456789abcdef"
    if has_d and not has_l and all(c in "0123456789ABCDEF" for c in run) and has_u:
        return "0123456789ABCDEF"
    if has_d and (has_l or has_u) and len(run) >= 16 and all(c in "0123456789abcdefABCDEF" for c in run):
        return "0123456789ABCDEFabcdef"  # hex in mixed case (Sourcegraph's sgp_ tokens)
    chars = ""
    if has_u:
        chars += "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if has_l:
        chars += "abcdefghijklmnopqrstuvwxyz"
    if has_d:
        chars += "0123456789"
    return chars


def is_word(run):
    """Letters that read as a word or a camelCase identifier (`authToken`, `GetEnvOrDefault`)."""
    if not run.isalpha():
        return False
    if run.islower() or run.isupper() or (run[0].isupper() and run[1:].islower()):
        return True
    return bool(re.fullmatch(r"(?:[A-Z]{2,5}(?=[A-Z][a-z]))?[A-Z]?[a-z]+(?:[A-Z][a-z]+)*[A-Z]{0,4}", run))


def is_placeholder(run):
    """A run a negative publishes for its shape, not a random body: the alphabet or the digits in
    order (`abcdefghijklmnopqrstuvwxyz1234567`), repeats (half its characters equal to one of
    the four before: `5555555dAAAAA7777777CcccCFaaaa...`, `123123123...`), or words
    (`SlackAppConfigurationAccessTokenHere`, `testAKCwithinsomeirrelevantstring`: mostly
    lowercase letters). Hex and base64 bodies, however long, are none of these."""
    if any(run[i : i + 8] in ALNUM for i in range(len(run) - 7)):
        return True
    repeats = sum(any(run[i] == run[i - k] for k in range(1, 5) if i >= k) for i in range(1, len(run)))
    if repeats * 2 >= len(run):
        return True
    if is_word(run):
        return True
    return sum(c.islower() for c in run) * 100 >= 85 * len(run)


def is_base64_json(run):
    """`eyJ...`: base64 of a JSON object (a JWT's header or claims)."""
    if not run.startswith("eyJ"):
        return False
    try:
        return base64.urlsafe_b64decode(run + "=" * (-len(run) % 4)).startswith(b'{"')
    except ValueError:
        return False


def looks_random(run, strict):
    """Whether a run of [A-Za-z0-9] is a secret-like body rather than a word or a placeholder."""
    if len(set(run)) <= 2:  # xxxx, 0000, ZZZZ: placeholders
        return not strict and len(run) >= 12
    if strict:  # negatives: only clearly random runs (a placeholder's shape is the point)
        kinds = sum([any(c.isdigit() for c in run), any(c.islower() for c in run), any(c.isupper() for c in run)])
        return len(run) >= 12 and kinds >= 2 and len(set(run)) >= 8 and not is_placeholder(run)
    if is_word(run):
        return len(run) >= 20 and (run.islower() or run.isupper())
    if run.isdigit():
        return len(run) >= 8
    if re.fullmatch(r"[A-Za-z]+[0-9]{1,2}|[0-9][A-Za-z]+", run):  # api03, admin01, token4, 2fa
        return len(run) >= 12
    return len(run) >= 5


# A JWT: header and payload, then a signature unless it is unsigned (detect-secrets' "no
# signature - but still valid" rows end after the payload).
JWT = re.compile(r"(eyJ[A-Za-z0-9_-]*\.eyJ[A-Za-z0-9_-]*)(?:(\.)([A-Za-z0-9_-]{8,}))?")


def randomise(text, prefixes, strict=False):
    """Literal text -> template: runs of letters and digits that look random become specs.

    A JWT keeps its header and payload (base64 JSON: structure) and gets a new signature."""
    segs = []
    pos = 0
    for m in JWT.finditer(text):
        segs.extend(randomise_runs(text[pos : m.start()], prefixes, strict))
        segs.append(m.group(1))
        if m.group(3):
            segs.append(m.group(2))
            segs.append(gen(set(m.group(3)) | set(ALNUM), len(m.group(3))))
        pos = m.end()
    segs.extend(randomise_runs(text[pos:], prefixes, strict))
    return merge(segs)


# Markers: the parts of gitleaks keywords made of 6+ letters and digits with a digit in them
# (`T3BlbkFJ`, base64 of `OpenAI`; `s4t2ud` of `s-s4t2ud-`), set by main(). In a positive
# they stay literal wherever they sit in a run; words (`confluence`) are not markers.
MARKERS = []


# Characters kept at the start of a line's first run (20+ characters), in positives and
# negatives alike, while extracting a detect-secrets plugin's table where they decide the label
# (set per plugin by ds_cases). Discord: the plugin's `[MNO][a-zA-Z\d_-]{23,25}\.` has no left
# boundary, so where an `M`, `N` or `O` sits in the first segment's first four characters is
# what its rows test: `ATMyOTQ4...` (26) is a positive because the token "starts on the 3rd
# character", `MTAyOTQ4...Ng0` (27) a negative because its characters 2-4 (`TAy`) start no
# token. Randomised, they made either label a coin toss (the negative a false positive for
# every tool in every context on one run in seven). They are base64 of a user id's first
# digits, not secret.
LEAD_KEPT = {"discord": 4}
LEAD = 0


def randomise_runs(text, prefixes, strict):
    """Runs of letters and digits that look random become specs; a known marker of 8+
    characters inside a run (OpenAI's `T3BlbkFJ` between two random halves) stays literal and
    the parts on either side are runs of their own."""
    segs = []
    pos = 0
    for k, m in enumerate(re.finditer(r"[A-Za-z0-9]+", text)):
        run = m.group(0)
        low = run.lower()
        hits = [] if strict else [(low.find(k), k) for k in MARKERS if k in low]
        if hits:
            i, k = min(hits)
            segs.append(text[pos : m.start()])
            segs.extend(randomise_runs(run[:i], prefixes, strict))
            segs.append(run[i : i + len(k)])
            segs.extend(randomise_runs(run[i + len(k) :], prefixes, strict))
            pos = m.end()
            continue
        keep = ""
        low = run.lower()
        for p in prefixes:
            if len(p) > len(keep) and low.startswith(p) and len(p) < len(run):
                keep = run[: len(p)]
        if not keep and len(run) >= 20 and not strict:
            keep = run[0]  # a long run's first character can be structure (Discord's [MNO])
        if LEAD and k == 0 and len(run) >= 20:
            keep = run[:LEAD]
        body = run[len(keep):]
        if strict and is_base64_json(run):
            continue  # a JWT header alone (`eyJhbGciOi...`): structure, not a secret
        # After a kept prefix, a positive's placeholder body (`AKCxxxxxxxxxx`) stands for a key.
        filler = keep and not strict and len(set(body)) <= 2 and len(body) >= 8
        # In a negative, a kept prefix's body decides alone (`GR1348941` + `XXXX...` is a
        # placeholder, though prefix and body together have eight distinct characters).
        whole = looks_random(run, strict) and not (strict and keep)
        if whole or (keep and (looks_random(body, strict) or filler) and len(body) >= 8):
            segs.append(text[pos : m.start()])
            segs.append(keep)
            # A body that opens with 8+ digits before 20+ letters and digits keeps them as digits (Notion's
            # `ntn_` + 11 digits + 35 letters and digits): chance gives such a run to random
            # letters and digits once in billions.
            lead = re.match(r"[0-9]{8,}(?=[A-Za-z][A-Za-z0-9]{19})", body) if not strict else None
            if lead:
                segs.append(gen("0123456789", lead.end()))
                body = body[lead.end():]
            segs.append(gen(shape_class(body), len(body)))
            pos = m.end()
    segs.append(text[pos:])
    return merge(segs)


def template_text(segs):
    return "".join(s if isinstance(s, str) else "\0" for s in segs)


# ---------------------------------------------------------------- regex -> template (gitleaks)


class Regex:
    """A small regex walker that builds one matching template (first alternative, middle counts)."""

    def __init__(self, src):
        self.s = src
        self.i = 0

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def parse(self):
        segs = self.alt()
        if self.i != len(self.s):
            raise ValueError("regex: trailing " + self.s[self.i :])
        return merge(segs)

    def alt(self):
        first = self.seq()
        while self.peek() == "|":
            self.i += 1
            self.seq()  # other alternatives: parsed, not used
        return first

    def seq(self):
        out = []
        while self.peek() not in ("", "|", ")"):
            atom = self.atom()
            lo, hi = self.quant()
            n = lo if hi == lo else (lo + 1 if hi is None else (lo + hi + 1) // 2)
            if atom is None:
                continue
            if isinstance(atom, set):
                if n:
                    out.append(gen(atom, n))
            else:
                out.extend(atom * n)
        return out

    def quant(self):
        c = self.peek()
        if c == "{":
            j = self.s.index("}", self.i)
            body = self.s[self.i + 1 : j]
            if not re.fullmatch(r"\d+(,\d*)?", body):
                return 1, 1
            self.i = j + 1
            lazy = self.peek() == "?"
            if lazy:
                self.i += 1
            if "," in body:
                a, b = body.split(",")
                return int(a), (int(b) if b else None)
            return int(body), int(body)
        if c and c in "?*+":
            self.i += 1
            if self.peek() == "?":
                self.i += 1
            return {"?": (1, 1), "*": (0, 0), "+": (8, 8)}[c]
        return 1, 1

    def escape_set(self, c):
        return {
            "d": set("0123456789"),
            "w": set(ALNUM + "_"),
            "s": {" "},
            "S": set(ALNUM),
            "W": {"-"},
            "D": set("abcdef"),
        }.get(c)

    def atom(self):
        c = self.peek()
        self.i += 1
        if c == "(":
            if self.s.startswith("?:", self.i):
                self.i += 2
            elif self.s.startswith("?", self.i):
                m = re.match(r"\?[a-zA-Z]*(:|\))", self.s[self.i :])
                if not m:
                    raise ValueError("regex group " + self.s[self.i :])
                self.i += len(m.group(0))
                if m.group(1) == ")":
                    return None
            inner = self.alt()
            if self.peek() != ")":
                raise ValueError("regex: unclosed group")
            self.i += 1
            return [merge(inner)] if False else inner
        if c == "[":
            return self.char_class()
        if c == "\\":
            e = self.peek()
            self.i += 1
            if e in "bBAz":
                return None
            if e == "x":
                h = self.s[self.i : self.i + 2]
                self.i += 2
                return [chr(int(h, 16))]
            st = self.escape_set(e)
            if st is not None:
                return st
            return [{"n": "\n", "t": "\t", "r": "\r"}.get(e, e)]
        if c in "^$":
            return None
        if c == ".":
            return set(ALNUM)
        return [c]

    def char_class(self):
        neg = self.peek() == "^"
        if neg:
            self.i += 1
        chars = set()
        first = True
        while True:
            c = self.peek()
            if c == "":
                raise ValueError("regex: unclosed class")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            self.i += 1
            if c == "[" and self.s.startswith(":", self.i):
                j = self.s.index(":]", self.i)
                name = self.s[self.i + 1 : j]
                self.i = j + 2
                chars |= {"alnum": set(ALNUM), "alpha": set(ALNUM[:52]), "digit": set("0123456789")}.get(name, set())
                continue
            if c == "\\":
                e = self.peek()
                self.i += 1
                st = self.escape_set(e)
                if st is not None:
                    chars |= st
                    continue
                c = {"n": "\n", "t": "\t", "r": "\r"}.get(e, e)
                if e == "x":
                    c = chr(int(self.s[self.i : self.i + 2], 16))
                    self.i += 2
            if self.peek() == "-" and self.i + 1 < len(self.s) and self.s[self.i + 1] != "]":
                self.i += 1
                hi = self.peek()
                self.i += 1
                if hi == "\\":
                    hi = self.peek()
                    self.i += 1
                chars |= {chr(x) for x in range(ord(c), ord(hi) + 1)}
            else:
                chars.add(c)
        if neg:
            chars = set(ALNUM) - chars
        # Generated values are tokens: whitespace and quotes in a class are not used.
        chars -= set(" \t\r\n'\"`\\")
        return chars or set(ALNUM)


def regex_template(src):
    return Regex(src).parse()


# ---------------------------------------------------------------- Go expressions (gitleaks)

GO_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/|(`[^`]*`)|("(?:\\.|[^"\\])*")|([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)|(\d+(?:\.\d+)?)|(\.\.\.|:=|.)""",
    re.S,
)


def go_tokens(src):
    out, i = [], 0
    while i < len(src):
        m = GO_TOKEN.match(src, i)
        if not m:
            raise ValueError("go: cannot read " + src[i : i + 30])
        i = m.end()
        if m.group(1):
            out.append(("str", m.group(1)[1:-1]))
        elif m.group(2):
            out.append(("str", ast.literal_eval(m.group(2).replace("\\x60", "`"))))
        elif m.group(3):
            out.append(("id", m.group(3)))
        elif m.group(4):
            out.append(("num", m.group(4)))
        elif m.group(5):
            out.append(("p", m.group(5)))
    return out


UTIL_REGEX = {
    "utils.Numeric": "[0-9]{%s}",
    "utils.Hex": "[a-f0-9]{%s}",
    "utils.AlphaNumeric": "[a-z0-9]{%s}",
    "utils.AlphaNumericExtendedShort": "[a-z0-9_-]{%s}",
    "utils.AlphaNumericExtended": "[a-z0-9=_\\-]{%s}",
    "utils.AlphaNumericExtendedLong": "[a-z0-9\\/=_\\+\\-]{%s}",
}


class Lit(str):
    """A Go string literal (its text may still be randomised when it stands alone)."""


class Go:
    """Evaluates the expressions gitleaks' rules build their tps/fps with."""

    def __init__(self, toks, env, unknown):
        self.t = toks
        self.i = 0
        self.env = env
        self.unknown = unknown

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ("eof", "")

    def take(self, kind=None, val=None):
        tok = self.peek()
        if (kind and tok[0] != kind) or (val and tok[1] != val):
            raise ValueError("go: expected %s %s, got %s" % (kind, val, tok))
        self.i += 1
        return tok

    def expr(self):
        v = self.primary()
        while self.peek() == ("p", "+"):
            self.i += 1
            v = concat(v, self.primary())
        return v

    def args(self):
        self.take("p", "(")
        out = []
        while self.peek() != ("p", ")"):
            out.append(self.expr())
            if self.peek() == ("p", "..."):
                self.i += 1
            if self.peek() == ("p", ","):
                self.i += 1
        self.take("p", ")")
        return out

    def primary(self):
        kind, val = self.peek()
        if kind == "str":
            self.i += 1
            return Lit(val)
        if kind == "num":
            self.i += 1
            return Lit(val)
        if (kind, val) == ("p", "["):
            self.take("p", "[")
            self.take("p", "]")
            self.take("id")
            self.take("p", "{")
            items = []
            while self.peek() != ("p", "}"):
                v = self.expr()
                items.extend(v[1] if isinstance(v, tuple) and v[0] == "list" else [v])
                if self.peek() == ("p", ","):
                    self.i += 1
            self.take("p", "}")
            return ("list", items)
        if kind == "id":
            self.i += 1
            if self.peek() != ("p", "("):
                if val in ("tps", "fps"):
                    return ("list", [])
                if val in self.env:
                    return self.env[val]
                raise ValueError("go: unknown name " + val)
            a = self.args()
            return self.call(val, a)
        raise ValueError("go: unexpected %s %s" % (kind, val))

    def call(self, name, a):
        if name in UTIL_REGEX:
            return Lit(UTIL_REGEX[name] % a[0])
        if name == "utils.Hex8_4_4_4_12":
            return Lit("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        if name in ("secrets.NewSecret", "newPlausibleSecret"):
            return ("segs", regex_template(str(a[0])))
        if name == "utils.GenerateSampleSecrets":
            return ("list", [("value", str(a[0]), a[1])])
        if name == "utils.GenerateSampleSecret":
            return ("value", str(a[0]), a[1])
        if name == "append":
            out = []
            for x in a:
                out.extend(x[1] if isinstance(x, tuple) and x[0] == "list" else [x])
            return ("list", (self.env.get("__list__") or []) if False else out)
        if name == "fmt.Sprintf":
            parts = str(a[0]).split("%s")
            if len(parts) != len(a):
                raise ValueError("go: Sprintf arity")
            v = Lit(parts[0])
            for arg, p in zip(a[1:], parts[1:]):
                v = concat(concat(v, arg), Lit(p))
            return v
        if name == "strings.Repeat":
            return Lit(str(a[0]) * int(a[1]))
        self.unknown.add(name)
        raise ValueError("go: unknown call " + name)


def as_segs(v):
    if isinstance(v, Lit):
        return [("lit", str(v))]
    if isinstance(v, tuple) and v[0] == "segs":
        return [("gen", s) if not isinstance(s, str) else ("fixed", s) for s in v[1]]
    if isinstance(v, tuple) and v[0] == "cat":
        return v[1]
    raise ValueError("go: not a string: %r" % (v,))


def concat(a, b):
    if isinstance(a, Lit) and isinstance(b, Lit):
        return Lit(str(a) + str(b))
    return ("cat", as_segs(a) + as_segs(b))


def to_template(v, prefixes, label):
    """An evaluated Go string -> template. Literal parts are randomised (strictly in negatives)."""
    segs = []
    parts = as_segs(v)
    generated = any(kind == "gen" for kind, _ in parts)
    for kind, s in parts:
        if kind == "lit" and generated:
            segs.append(s)  # structure around generated parts, written by the rule's authors
        elif kind == "lit":
            segs.extend(randomise(s, prefixes, strict=(label == "negative")))
        elif kind == "fixed":
            segs.append(s)
        else:
            segs.append(s)
    return merge(segs)


def go_functions(src):
    """(function body) for each `func X() *config.Rule`."""
    parts = re.split(r"\nfunc ", src)
    return [p for p in parts if "*config.Rule" in p.split("\n", 1)[0]]


def statements(body, var):
    """Right-hand sides of `var := ...` / `var = append(var, ...)` statements, in order."""
    toks = go_tokens(body)
    out = []
    for i in range(len(toks) - 2):
        if toks[i] == ("id", var) and toks[i + 1][0] == "p" and toks[i + 1][1] in (":=", "="):
            if i > 0 and toks[i - 1][1] in (".", ","):
                continue
            out.append((toks, i + 2))
    return out


def local_vars(body, unknown, env=None):
    """Simple local string variables (`x := secrets.NewSecret(...)`) a rule's tps use."""
    env = dict(env or {})
    toks = go_tokens(body)
    for i in range(1, len(toks) - 1):
        if (toks[i] == ("p", ":=") or (toks[i] == ("p", "=") and i > 1 and toks[i - 2] == ("id", "var"))) and toks[i - 1][0] == "id" and toks[i - 1][1] not in ("tps", "fps", "r"):
            try:
                g = Go(toks, env, unknown)
                g.i = i + 1
                env[toks[i - 1][1]] = g.expr()
            except (ValueError, IndexError):
                pass
    return env


def value_or_text(segs):
    text = template_text(segs)
    return "value" if re.fullmatch(r"[^\s'\"`=:,;(){}<>]+", text) else "text"


def gitleaks_cases(repo, prefixes):
    cases, skipped, unknown = [], [], set()
    for path in ls(repo, "cmd/generate/config/rules/"):
        if not path.endswith(".go") or path.endswith("_test.go"):
            continue
        src = show(repo, path)
        # Package-level `var x = ...` (lists of sample keys some rules share).
        globals_ = local_vars("\n".join(re.findall(r"(?ms)^var \w+ = .*?^[})]?$", src)), unknown)
        for fn in go_functions(src):
            m = re.search(r'RuleID:\s*"([^"]+)"', fn)
            if not m:
                continue
            rule = m.group(1)
            family = "generic" if rule.startswith("generic") else rule
            # A vendor format is one the value itself shows (a prefix, a shape); rules built with
            # GenerateSemiGenericRegex find a bare random value only next to the vendor's name.
            vendor = family != "generic" and "GenerateSemiGenericRegex" not in fn
            key = rule.split("-")[0]
            allowed = allowlisted_values(fn)
            env = local_vars(fn, unknown, globals_)
            for var, label in (("tps", "positive"), ("fps", "negative")):
                n = 0
                for toks, start in statements(fn, var):
                    g = Go(toks, env, unknown)
                    g.i = start
                    try:
                        v = g.expr()
                    except (ValueError, IndexError, SyntaxError) as e:
                        skipped.append("%s %s %s: %s" % (path, rule, var, e))
                        continue
                    items = v[1] if isinstance(v, tuple) and v[0] == "list" else [v]
                    for it in items:
                        try:
                            if isinstance(it, tuple) and it[0] == "value":
                                segs = to_template(it[2], prefixes, label)
                                k, kind = it[1], "value"
                            else:
                                segs = to_template(it, prefixes, label)
                                k, kind = key, value_or_text(segs)
                        except ValueError as e:
                            skipped.append("%s %s %s: %s" % (path, rule, var, e))
                            continue
                        n += 1
                        literal = not any(k == "gen" for k, _ in as_segs(it[2] if it[0] == "value" else it)) if isinstance(it, tuple) else True
                        cases.append(
                            {
                                "id": "gitleaks/%s/%s%d" % (rule, "tp" if label == "positive" else "fp", n),
                                "source": "gitleaks:%s:%s" % (path, rule),
                                "family": family,
                                "vendor_format": vendor,
                                "label": label,
                                "kind": kind,
                                "key": k,
                                "file": "snippet.txt",
                                "template": segs,
                                "_literal": literal,
                                "_allowlisted": isinstance(it, Lit) and str(it) in allowed,
                            }
                        )
    return cases, skipped, unknown


def allowlisted_values(fn):
    """The exact values a gitleaks rule's allowlist lets through: its `Allowlists` regexes that
    are plain literals (gcp-api-key's firebase sample keys)."""
    m = re.search(r"Allowlists:(.*?)\n\t}\n", fn, re.S)
    if not m:
        return set()
    return {x for x in re.findall(r"MustCompile\(`([^`]*)`\)", m.group(1)) if re.fullmatch(r"[A-Za-z0-9_-]+", x)}


# detect-secrets negatives that are negatives only by their exact published value.
DS_EXACT_VALUE = {
    "detect-secrets/openai/fp1": "a negative only by `# pragma: allowlist nextline secret` above it",
    "detect-secrets/pypi_token/fp1": "a negative only by `# pragma: allowlist nextline secret` above it",
    "detect-secrets/gitlab_token/fp6": "a GitHub `ghp_` token in the GitLab plugin's negatives: not GitLab's, but re-randomised a real-shaped github-pat",
}


def drop_reason(case):
    """Why a published negative is not one once re-randomised, or None. A negative that upstream
    excludes only by its exact value (a rule allowlist entry, an allowlist pragma), once its
    random part is re-randomised, is a real-shaped key of that vendor. A negative with a
    structural reason (too short, too long, wrong case, a bad character, a placeholder, a word)
    keeps that reason through re-randomising and stays."""
    if case["label"] != "negative":
        return None
    if case["id"] in DS_EXACT_VALUE:
        return DS_EXACT_VALUE[case["id"]]
    generated = any(not isinstance(x, str) for x in case["template"])
    if case.get("_allowlisted") and generated:
        return "a published sample key the rule allows by exact value (its allowlist)"
    return None


# ---------------------------------------------------------------- detect-secrets (Python tests)

DS_FAMILY = {
    "artifactory": "artifactory",
    "aws_key": "aws-access-token",
    "azure_storage_key": "azure-storage-key",
    "basic_auth": "basic-auth",
    "cloudant": "cloudant",
    "discord": "discord",
    "github_token": "github-token",
    "gitlab_token": "gitlab-token",
    "high_entropy_strings": "entropy",
    "ibm_cloud_iam": "ibm-cloud-iam",
    "ibm_cos_hmac": "ibm-cos-hmac",
    "jwt": "jwt",
    "keyword": "keyword",
    "mailchimp_key": "mailchimp",
    "npm": "npm",
    "openai": "openai",
    "private_key": "private-key",
    "pypi_token": "pypi",
    "sendgrid": "sendgrid",
    "slack": "slack",
    "softlayer": "softlayer",
    "square_oauth": "square",
    "stripe_key": "stripe",
    "telegram_token": "telegram",
    "twilio": "twilio",
}
# Prefixes that detect-secrets' plugins match and gitleaks' keywords do not name, kept literal at
# the start of a randomised run: artifactory.py's `AKC[a-zA-Z0-9]{10,}` (API key) and
# `AP[\dABCDEF][a-zA-Z0-9]{8,}` (encrypted password);
# twilio.py's `AC[a-z0-9]{32}` (account SID; `SK` is a gitleaks keyword already).
DS_PREFIXES = ["akc", "ac"] + ["ap" + c for c in "0123456789abcdef"]
# keyword_test.py: the extension each table is tested with.
DS_KEYWORD_EXT = {
    "CONFIG_TEST_CASES": "conf",
    "GOLANG_TEST_CASES": "go",
    "COMMON_C_TEST_CASES": "c",
    "QUOTES_REQUIRED_TEST_CASES": "py",
}


class PyEval:
    """Evaluates the constant expressions of a test module (literals, names, `.format`, %, +)."""

    def __init__(self, env):
        self.env = env

    def ev(self, n):
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, (ast.Tuple, ast.List)):
            return [self.ev(x) for x in n.elts]
        if isinstance(n, ast.Name):
            if n.id in self.env:
                return self.env[n.id]
            raise ValueError("name " + n.id)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            return self.ev(n.left) + self.ev(n.right)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
            r = self.ev(n.right)
            return self.ev(n.left) % (tuple(r) if isinstance(r, list) else r)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            return self.ev(n.left) * self.ev(n.right)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "format":
            return self.ev(n.func.value).format(*[self.ev(a) for a in n.args])
        if isinstance(n, ast.JoinedStr):
            return "".join(self.ev(v.value) if isinstance(v, ast.FormattedValue) else v.value for v in n.values)
        raise ValueError("expression " + ast.dump(n)[:60])


def ds_rows(value):
    """(line, label) rows of a parametrize table: (str, bool) or keyword's (str, str|None)."""
    out = []
    if isinstance(value, list):
        if len(value) >= 2 and isinstance(value[0], str) and (isinstance(value[1], bool) or value[1] is None):
            return [(value[0], bool(value[1]))]
        if len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], str) and "\n" not in value[1] and value[1] in value[0]:
            return [(value[0], True)]
        for x in value:
            out.extend(ds_rows(x))
    return out


def ds_cases(repo, prefixes):
    global LEAD
    cases, skipped = [], []
    for path in ls(repo, "tests/plugins/"):
        stem = path.rsplit("/", 1)[-1].removesuffix("_test.py")
        if stem not in DS_FAMILY:
            continue  # base_test, ip_public_test (an IP address is not a secret)
        family = DS_FAMILY[stem]
        LEAD = LEAD_KEPT.get(stem, 0)
        tree = ast.parse(show(repo, path))
        env = {}
        tables = []
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    env[node.targets[0].id] = PyEval(env).ev(node.value)
                except (ValueError, TypeError, KeyError, IndexError):
                    continue
                name = node.targets[0].id
                if stem == "keyword" and name in DS_KEYWORD_EXT:
                    tables.append((name, DS_KEYWORD_EXT[name], env[name]))
        if stem != "keyword":
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "parametrize"
                    and len(node.args) >= 2
                ):
                    try:
                        tables.append(("parametrize", "txt", PyEval(env).ev(node.args[1])))
                    except (ValueError, TypeError, KeyError, IndexError) as e:
                        skipped.append("%s: %s" % (path, e))
        n = {"positive": 0, "negative": 0}
        seen = set()
        for _name, ext, table in tables:
            for line, flag in ds_rows(table):
                label = "positive" if flag else "negative"
                if (line, label, ext) in seen or len(line) > 2000:
                    continue
                seen.add((line, label, ext))
                segs = randomise(line, sorted(set(prefixes) | set(DS_PREFIXES)), strict=not flag)
                n[label] += 1
                kind = value_or_text(segs)
                cases.append(
                    {
                        "id": "detect-secrets/%s/%s%d" % (stem, "tp" if flag else "fp", n[label]),
                        "source": "detect-secrets:%s" % path,
                        "family": family,
                        "vendor_format": family not in GENERIC_FAMILIES,
                        "label": label,
                        "kind": kind,
                        "key": family.split("-")[0] if family not in GENERIC_FAMILIES else "secret",
                        "file": "snippet." + ext,
                        "template": segs,
                    }
                )
    LEAD = 0
    text = show(repo, "test_data/files/file_with_no_secrets.py")
    cases.append(
        {
            "id": "detect-secrets/test_data/file_with_no_secrets",
            "source": "detect-secrets:test_data/files/file_with_no_secrets.py",
            "family": "generic",
            "vendor_format": False,
            "label": "negative",
            "kind": "text",
            "key": "secret",
            "file": "file_with_no_secrets.py",
            "template": randomise(text, prefixes, strict=True),
        }
    )
    return cases, skipped


# ---------------------------------------------------------------- ripsecrets

RS_FAMILY = {"random": "entropy", "url": "basic-auth", "aws_json": "aws-access-token", "pem_key": "private-key"}


def rs_cases(repo, prefixes):
    cases = []
    for path in ls(repo, "test/"):
        name = path.rsplit("/", 1)[-1]
        text = show(repo, path)
        family = RS_FAMILY.get(name, name.replace("_", "-"))
        if path.startswith("test/one_per_file/"):
            segs = randomise(text, prefixes)
            cases.append(
                {
                    "id": "ripsecrets/%s" % name,
                    "source": "ripsecrets:%s" % path,
                    "family": family,
                    "vendor_format": family not in GENERIC_FAMILIES,
                    "label": "positive",
                    "kind": "text",
                    "key": "secret",
                    "file": name + (".json" if name.endswith("json") else ""),
                    "template": segs,
                }
            )
            continue
        flag = path.startswith("test/one_per_line/")
        for i, line in enumerate(l for l in text.splitlines() if l.strip()):
            segs = randomise(line, prefixes, strict=not flag)
            cases.append(
                {
                    "id": "ripsecrets/%s/%d" % (name, i + 1),
                    "source": "ripsecrets:%s" % path,
                    "family": "generic" if not flag else family,
                    "vendor_format": flag and family not in GENERIC_FAMILIES,
                    "label": "positive" if flag else "negative",
                    "kind": value_or_text(segs),
                    "key": "secret" if family in GENERIC_FAMILIES else family.split("-")[0],
                    "file": "snippet.txt",
                    "template": segs,
                }
            )
    return cases


def main():
    gl, ds, rs = sys.argv[1:4]
    # Known prefixes: every gitleaks rule keyword, kept literal at the start of a randomised run.
    rules_src = "".join(show(gl, p) for p in ls(gl, "cmd/generate/config/rules/") if p.endswith(".go"))
    prefixes = set()
    for kw in re.findall(r"Keywords:\s*\[\]string\{([^}]*)\}", rules_src):
        for k in re.findall(r'"([^"]+)"', kw):
            k = re.sub(r"[^a-z0-9].*$", "", k.lower())
            if 2 <= len(k) <= 12:
                prefixes.add(k)
    prefixes = sorted(prefixes)
    for kw in re.findall(r"Keywords:\s*\[\]string\{([^}]*)\}", rules_src):
        for k in re.findall(r'"([^"]+)"', kw):
            for piece in re.findall(r"[A-Za-z0-9]{6,}", k):
                if re.search(r"[0-9]", piece) and re.search(r"[A-Za-z]", piece):
                    MARKERS.append(piece.lower())
    MARKERS[:] = sorted(set(MARKERS))
    print("markers: " + " ".join(MARKERS), file=sys.stderr)
    c1, sk1, unknown = gitleaks_cases(gl, prefixes)
    c2, sk2 = ds_cases(ds, prefixes)
    c3 = rs_cases(rs, prefixes)
    head = {
        "sources": {
            "gitleaks": {"repo": "https://github.com/gitleaks/gitleaks", "commit": git(gl, "rev-parse", "HEAD").strip()},
            "detect-secrets": {"repo": "https://github.com/Yelp/detect-secrets", "commit": git(ds, "rev-parse", "HEAD").strip()},
            "ripsecrets": {"repo": "https://github.com/sirwart/ripsecrets", "commit": git(rs, "rev-parse", "HEAD").strip()},
        },
        "generated_by": "benches/corpus/extract.py",
    }
    dropped = {c["id"]: drop_reason(c) for c in c1 + c2 + c3 if drop_reason(c)}
    head["dropped"] = dropped
    print(json.dumps(head, sort_keys=True))
    for c in c1 + c2 + c3:
        c.pop("_literal", None)
        c.pop("_allowlisted", None)
        if c["id"] not in dropped:
            print(json.dumps(c, sort_keys=True, ensure_ascii=False))
    print("dropped %d negatives that re-randomising made real-looking: %s" % (len(dropped), " ".join(dropped)), file=sys.stderr)
    for s in sk1 + sk2:
        print("skipped: " + s, file=sys.stderr)
    if unknown:
        print("unknown Go calls: " + ", ".join(sorted(unknown)), file=sys.stderr)
    by = {}
    for c in c1 + c2 + c3:
        by.setdefault((c["source"].split(":")[0], c["label"]), 0)
        by[(c["source"].split(":")[0], c["label"])] += 1
    print("cases: %s" % sorted(by.items()), file=sys.stderr)


if __name__ == "__main__":
    main()
