//! The context tokenizer: one linear pass over a text that knows where a value sits —
//! assignments in code and configuration (`k = v`, `k: v`, `k := v`, `k => v`, `export`,
//! `set`, Dockerfile `ENV`/`ARG`), quoted strings (`"..."` with C/JSON escapes, `'...'`, Go
//! backticks, C# `@"..."` verbatim strings), XML elements and attributes (and the
//! `<add key="Password" value="..."/>` pair), and command-line flags (`--password v`,
//! `--password=v`, `mysql -pv`, `-u user:v`, from the data in [`super::rules`]).
//!
//! It yields [`Value`]s: where the value is in the text, the name it is assigned to (if any),
//! its context, and its unescaped bytes when unescaping changed them (JSON `\n`, `\"`,
//! `\u0041`, XML entities, C# `""`), each byte mapped back to the text's offsets so that a
//! finding inside an unescaped value redacts the right bytes. The scanner hands a named
//! value to the keyword rule and an unescaped one to every rule (see `scan.rs`).
//!
//! Over 1,000 lines: one lexer whose state (the line, the dead zones, the checkpoints a
//! stream resumes from) is read and written by every construct it knows; split by construct,
//! each file would need that whole state, so it stays one. Its tests are in `context_tests.rs`.
//!
//! Linear time by construction: each construct is read forward at most [`MAX_VALUE`] bytes;
//! a string that does not close leaves a dead zone (its quote byte opens nothing before the
//! point its search reached), so a run of quotes, backslashes, `<`, `@"` or backticks costs
//! O(1) per byte; no regex runs over whole lines.
//!
//! Over 1,000 lines: one lexer whose states (quotes, escapes, tags, flags, shell words, the
//! state carried between regions, `LexState`) share its dead-zone bookkeeping; split, each part would need the
//! lexer's internals. Its tests live in `context_tests.rs`.

use super::rules::{FlagForm, SECRET_FLAGS};

/// The longest value read (a private key block in a JSON string is a few KiB).
pub const MAX_VALUE: usize = 16 * 1024;
/// The longest name taken for a key.
const MAX_NAME: usize = 128;

/// Where a value sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctx {
    /// A `"..."` or `'...'` string.
    Quoted,
    /// A Go raw string (backticks).
    Backtick,
    /// A C# verbatim string `@"..."`.
    Verbatim,
    /// The text of an XML element.
    XmlElement,
    /// An XML attribute's value.
    XmlAttribute,
    /// A command-line flag's value, or a Dockerfile `ENV name value` word: unquoted.
    Word,
}

impl Ctx {
    /// Whether the value's extent is told by the syntax (quotes, tags), not guessed: an
    /// unquoted word gets the keyword rule's stricter filters.
    pub fn delimited(self) -> bool {
        self != Ctx::Word
    }
}

/// A value's bytes after unescaping, each mapped to the text: byte `i` came from
/// `text[starts[i]..ends[i]]`.
#[derive(Debug, Default)]
pub struct Unescaped {
    pub bytes: Vec<u8>,
    pub starts: Vec<usize>,
    pub ends: Vec<usize>,
}

impl Unescaped {
    fn push(&mut self, b: u8, s: usize, e: usize) {
        self.bytes.push(b);
        self.starts.push(s);
        self.ends.push(e);
    }
    fn push_char(&mut self, c: char, s: usize, e: usize) {
        let mut buf = [0u8; 4];
        for &b in c.encode_utf8(&mut buf).as_bytes() {
            self.push(b, s, e);
        }
    }
}

/// One value found.
#[derive(Debug)]
pub struct Value<'u> {
    /// The name it is assigned to (`text[key.0..key.1]`), if any.
    pub key: Option<(usize, usize)>,
    /// The value as written (inside quotes or tags).
    pub start: usize,
    pub end: usize,
    pub ctx: Ctx,
    /// Its bytes after unescaping, when that changed them.
    pub unescaped: Option<&'u Unescaped>,
    /// The value of a flag that the rules' data says takes a secret (`mysql -p`), whatever
    /// the flag's name.
    pub secret_flag: bool,
}

/// Byte classes.
const WORD: u8 = 1; // [A-Za-z0-9_.$-]
const SPACE: u8 = 2; // space, tab, \r, \f, \v

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-' || b == b'$' {
            t[i] = WORD;
        } else if b == b' ' || b == b'\t' || b == b'\r' || b == 0x0b || b == 0x0c {
            t[i] = SPACE;
        }
        i += 1;
    }
    t
};

fn is_word(b: u8) -> bool {
    CLASS[b as usize] == WORD
}
fn is_space(b: u8) -> bool {
    CLASS[b as usize] == SPACE
}

/// A shell-ish word: everything up to whitespace, a quote or a shell operator.
fn is_shell_word(b: u8) -> bool {
    !(b.is_ascii_whitespace()
        || matches!(
            b,
            b'"' | b'\'' | b'`' | b';' | b'|' | b'&' | b'<' | b'>' | b'(' | b')'
        ))
}

/// A flag waiting for its value in the next word.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Pending {
    #[default]
    None,
    /// `--password v`, `sshpass -p v`, `ENV NAME v`: the next word is the value of `key`
    /// (a flag that takes a secret by the rules' data when `.1`).
    Next((usize, usize), bool),
    /// `-u user:v`: the next word's part after its first `:`.
    UserColon((usize, usize)),
}

struct Lexer<'t, 'f> {
    text: &'t [u8],
    emit: &'f mut dyn FnMut(&Value),
    /// The last name seen that may be assigned a value, and whether an assignment operator
    /// followed it.
    key: Option<(usize, usize)>,
    assigned: bool,
    /// The assignment is prose's `to`/`is`: only a value without whitespace is the name's.
    prose_assigned: bool,
    /// Words seen since the line (or a shell separator) began: the first is the command
    /// (kept as the program of [`SECRET_FLAGS`] it names, if any: a checkpoint carries it
    /// however far back the command was written).
    words: u32,
    command: Option<&'static str>,
    /// The line's first word is Dockerfile `ENV`/`ARG`.
    env_line: bool,
    pending: Pending,
    /// Dead zones: a `"`, `'`, backtick or `@"` before these offsets opens nothing (a search
    /// from an earlier one found no close before them).
    dead_dq: usize,
    dead_sq: usize,
    dead_bt: usize,
    dead_vb: usize,
    dead_lt: usize,
    scratch: Unescaped,
    /// The earliest opening of a construct still open at the text's end whose value is
    /// judged only once it closes: a C# verbatim string (unescaped whole), the text of an
    /// element that names a secret or holds an entity.
    hold: Option<usize>,
    /// The last run of shell-word bytes measured (`start..end`): a flag inside a long word
    /// finds the word's end here instead of reading on again (a word of `-k-k-k…` would
    /// otherwise be read up to `MAX_VALUE` bytes at each flag: found by `secrets_time`).
    shell_run: (usize, usize),
    /// An element's text searched for its closing tag up to the text's end without finding
    /// it: where that search stopped (what follows may close it, and the lexer would then
    /// have skipped the text rather than read it).
    dead_el: usize,
    /// Checkpoints: the whole state at the top of the loop every [`CHECKPOINT`] bytes read.
    checkpoints: Vec<(usize, LexState)>,
    next_checkpoint: usize,
}

/// Bytes lexed between checkpoints ([`Trace::checkpoints`]): a stream resumes from the last
/// one before its kept context, so this bounds what it reads again.
const CHECKPOINT: usize = 1024;

/// The lexer's state within a line: the name seen, the assignment, the words and the
/// command, the flag waiting for its value. Reset where a region begins; carried in a
/// checkpoint taken inside one (a line of megabytes of JSON or prose).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Line {
    key: Option<(usize, usize)>,
    assigned: bool,
    prose_assigned: bool,
    words: u32,
    command: Option<&'static str>,
    env_line: bool,
    pending: Pending,
}

/// What the tokenizer carries from one region to the next (offsets in the text lexed): where
/// a construct read on to (the next region is read from there at the earliest), and its
/// dead zones. Between regions nothing else survives (each region begins as a line). The
/// streaming redactor takes it at the start of the text it keeps, so that a resumed scan
/// starts from the state the scan of the whole text has there, not from a guess.
///
/// A checkpoint ([`Trace::checkpoints`]) is taken inside a region (`mid`): it also holds the
/// line's state there (the name seen, the command, a flag waiting), and a scan started from
/// it goes on reading that region from `at`, exactly as the whole text's scan did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LexState {
    pub at: usize,
    dead_dq: usize,
    dead_sq: usize,
    dead_bt: usize,
    dead_vb: usize,
    dead_lt: usize,
    dead_el: usize,
    /// Taken inside a region, at `at`: the scan resumes that region there with `line`.
    pub mid: bool,
    line: Line,
}

impl LexState {
    /// The same state for the text with its first `n` bytes removed. A name that began
    /// before the cut becomes an empty one (still there, naming nothing): the redactor keeps
    /// the names a checkpoint refers to up to [`REDO_NAMES`] bytes back.
    pub fn shifted(self, n: usize) -> LexState {
        let range = |(s, e): (usize, usize)| {
            if s < n { (0, 0) } else { (s - n, e - n) }
        };
        let l = self.line;
        LexState {
            at: self.at.saturating_sub(n),
            dead_dq: self.dead_dq.saturating_sub(n),
            dead_sq: self.dead_sq.saturating_sub(n),
            dead_bt: self.dead_bt.saturating_sub(n),
            dead_vb: self.dead_vb.saturating_sub(n),
            dead_lt: self.dead_lt.saturating_sub(n),
            dead_el: self.dead_el.saturating_sub(n),
            mid: self.mid,
            line: Line {
                key: l.key.map(range),
                pending: match l.pending {
                    Pending::None => Pending::None,
                    Pending::Next(k, f) => Pending::Next(range(k), f),
                    Pending::UserColon(k) => Pending::UserColon(range(k)),
                },
                ..l
            },
        }
    }

    /// The earliest offset the line's state refers to (a name, a flag): a resumed scan
    /// keeps the text from there, up to [`REDO_NAMES`] bytes back.
    pub fn names_from(self) -> usize {
        let l = self.line;
        let mut from = self.at;
        if let Some(k) = l.key {
            from = from.min(k.0);
        }
        if let Pending::Next(k, _) | Pending::UserColon(k) = l.pending {
            from = from.min(k.0);
        }
        from
    }

    /// The furthest offset it depends on: at or past the end of the text lexed, a construct
    /// was still open there (what follows may close it) and the state is not yet known.
    pub fn reach(self) -> usize {
        self.at
            .max(self.dead_dq)
            .max(self.dead_sq)
            .max(self.dead_bt)
            .max(self.dead_vb)
            .max(self.dead_lt)
            .max(self.dead_el)
    }
}

/// How far back from a checkpoint a resumed scan keeps the names its line state refers to.
pub const REDO_NAMES: usize = 4096;

/// What a run of the tokenizer tells a streaming redactor about the text it read.
#[derive(Debug, Default)]
pub struct Trace {
    /// Each region read: its start, its end, and the state after it.
    pub regions: Vec<(usize, usize, LexState)>,
    /// Checkpoints inside the regions read, in order: an offset and the whole state at it
    /// (`mid`), taken every [`CHECKPOINT`] bytes lexed, so that a scan resumed there reads on
    /// exactly as this one did, however long the line (no guessed start).
    pub checkpoints: Vec<(usize, LexState)>,
    /// The earliest opening of a construct still open at the text's end whose value is
    /// judged only once it closes (a C# verbatim string, unescaped whole; the text of an
    /// element that names a secret or holds an entity): the redactor holds text back from
    /// its line until it closes.
    pub hold: Option<usize>,
}

/// Runs the tokenizer over the `regions` of `text` (sorted, disjoint: the lines worth
/// reading, see `scan.rs`), each begun as a line is; a construct begun in a region may read
/// on past its end (a string, a tag, an element's text). It starts in state `start` (the
/// state before the first region: the default for a whole text), and notes in `trace` each
/// region read with the state after it, and what is still open at the text's end.
pub fn values_in(
    text: &[u8],
    regions: &[(usize, usize)],
    start: LexState,
    emit: &mut dyn FnMut(&Value),
    trace: &mut Trace,
) {
    let mut l = Lexer::new(text, emit);
    l.dead_dq = start.dead_dq;
    l.dead_sq = start.dead_sq;
    l.dead_bt = start.dead_bt;
    l.dead_vb = start.dead_vb;
    l.dead_lt = start.dead_lt;
    l.dead_el = start.dead_el;
    l.next_checkpoint = start.at;
    let mut at = start.at;
    // A checkpoint's region goes on from it with the line's state it holds (the scanner
    // begins that region at the checkpoint, see `scan.rs`).
    let mut resume = start.mid.then_some(start.line);
    for &(s, e) in regions {
        match resume {
            Some(line) if s <= at && at < e => {
                l.set_line(line);
                resume = None;
            }
            Some(_) if s > at => {
                resume = None;
                l.new_line();
            }
            _ => l.new_line(),
        }
        at = l.run(at.max(s), e.min(text.len()));
        trace.regions.push((s, e, LexState { at, ..l.state(at) }));
    }
    trace.hold = l.hold;
    trace.checkpoints = std::mem::take(&mut l.checkpoints);
}

impl<'t, 'f> Lexer<'t, 'f> {
    /// A lexer at the start of `text`.
    fn new(text: &'t [u8], emit: &'f mut dyn FnMut(&Value)) -> Lexer<'t, 'f> {
        Lexer {
            text,
            emit,
            key: None,
            assigned: false,
            prose_assigned: false,
            words: 0,
            command: None,
            env_line: false,
            pending: Pending::None,
            dead_dq: 0,
            dead_sq: 0,
            dead_bt: 0,
            dead_vb: 0,
            dead_lt: 0,
            scratch: Unescaped::default(),
            hold: None,
            shell_run: (0, 0),
            dead_el: 0,
            checkpoints: Vec::new(),
            next_checkpoint: 0,
        }
    }

    /// The state at `at` between regions (`mid` false) or, as a checkpoint, inside one.
    fn state(&self, at: usize) -> LexState {
        LexState {
            at,
            dead_dq: self.dead_dq,
            dead_sq: self.dead_sq,
            dead_bt: self.dead_bt,
            dead_vb: self.dead_vb,
            dead_lt: self.dead_lt,
            dead_el: self.dead_el,
            mid: false,
            line: Line {
                key: self.key,
                assigned: self.assigned,
                prose_assigned: self.prose_assigned,
                words: self.words,
                command: self.command,
                env_line: self.env_line,
                pending: self.pending,
            },
        }
    }

    fn set_line(&mut self, l: Line) {
        self.key = l.key;
        self.assigned = l.assigned;
        self.prose_assigned = l.prose_assigned;
        self.words = l.words;
        self.command = l.command;
        self.env_line = l.env_line;
        self.pending = l.pending;
    }

    /// The end of the shell word starting at `i` (at most `MAX_VALUE` bytes on). The run
    /// of shell-word bytes holding `i` is measured once (`shell_run`), so the flags of one
    /// long word cost its length, not its length times theirs.
    fn shell_word_end(&mut self, i: usize) -> usize {
        let text = self.text;
        let (s, e) = self.shell_run;
        let end = if s <= i && i < e {
            e
        } else {
            let mut e = i;
            while e < text.len() && is_shell_word(text[e]) {
                e += 1;
            }
            self.shell_run = (i, e);
            e
        };
        end.min(i + MAX_VALUE)
    }

    fn new_line(&mut self) {
        self.key = None;
        self.assigned = false;
        self.words = 0;
        // A command does not run on into the next region read: the lines between are not
        // lexed, and a stream's scan resumed between regions (whose state is [`LexState`]
        // without the line's) would read a `-p` there as nobody's flag where the whole text read it as
        // the last region's program's (attack finding: `mysql` lines apart from `-p<value>`).
        self.command = None;
        self.env_line = false;
        self.pending = Pending::None;
    }

    /// Lexes from `from` until a construct ends at or after `to`; returns where it stopped.
    fn run(&mut self, from: usize, to: usize) -> usize {
        let text = self.text;
        let n = to;
        let mut i = from;
        while i < n {
            if i >= self.next_checkpoint {
                self.checkpoints.push((
                    i,
                    LexState {
                        mid: true,
                        ..self.state(i)
                    },
                ));
                self.next_checkpoint = i + CHECKPOINT;
            }
            let b = text[i];
            if is_space(b) {
                i += 1;
                continue;
            }
            if is_word(b) {
                i = self.word(i);
                continue;
            }
            match b {
                b'\n' => {
                    self.new_line();
                    i += 1;
                }
                b'"' => i = self.quoted(i, b'"'),
                b'\'' => {
                    // An apostrophe inside a word (`don't`) opens nothing; after a flag
                    // waiting for its value (`mysql -p'a;b'`), the value opens.
                    if i > 0
                        && text[i - 1].is_ascii_alphanumeric()
                        && !matches!(self.pending, Pending::Next(..))
                    {
                        self.punct();
                        i += 1;
                    } else {
                        i = self.quoted(i, b'\'');
                    }
                }
                b'`' => {
                    let e = self.backtick(i);
                    i = e;
                }
                b'@' if text.get(i + 1) == Some(&b'"') => {
                    let e = self.verbatim(i);
                    i = e;
                }
                b'<' => {
                    let e = self.tag(i);
                    i = e;
                }
                b'=' | b':' => {
                    if self.key.is_some() {
                        self.assigned = true;
                        self.prose_assigned = false;
                    }
                    i += 1;
                }
                // `+=`, `?=`, `:=`, `=>` (the `>` after an `=`), `==`.
                b'+' | b'?' if text.get(i + 1) == Some(&b'=') => i += 1,
                b'>' if i > 0 && text[i - 1] == b'=' => i += 1,
                b'\\' => {
                    self.punct();
                    i += 2;
                }
                b';' | b'|' | b'&' | b'(' => {
                    self.punct();
                    self.words = 0;
                    i += 1;
                }
                _ => {
                    self.punct();
                    i += 1;
                }
            }
        }
        i
    }

    /// A construct opened at `at` whose value is judged only once it closes, whose search
    /// stopped at `stop`: to be held back when that is the text's end.
    fn note_hold(&mut self, at: usize, stop: usize) {
        if stop >= self.text.len() && self.hold.is_none_or(|o| at < o) {
            self.hold = Some(at);
        }
    }

    /// Punctuation that ends an assignment's context.
    fn punct(&mut self) {
        self.key = None;
        self.assigned = false;
        self.pending = Pending::None;
    }

    fn emit_word(&mut self, key: (usize, usize), start: usize, end: usize, secret_flag: bool) {
        (self.emit)(&Value {
            key: Some(key),
            start,
            end,
            ctx: Ctx::Word,
            unescaped: None,
            secret_flag,
        });
    }

    /// Emits a value read into `self.scratch` (unescaped), or as written if unescaping did
    /// not change it.
    fn emit_scratch(&mut self, key: Option<(usize, usize)>, start: usize, end: usize, ctx: Ctx) {
        self.emit_scratch_flag(key, start, end, ctx, false);
    }

    fn emit_scratch_flag(
        &mut self,
        key: Option<(usize, usize)>,
        start: usize,
        end: usize,
        ctx: Ctx,
        secret_flag: bool,
    ) {
        let changed = self.scratch.bytes.as_slice() != &self.text[start..end];
        let scratch = std::mem::take(&mut self.scratch);
        (self.emit)(&Value {
            key,
            start,
            end,
            ctx,
            unescaped: changed.then_some(&scratch),
            secret_flag,
        });
        self.scratch = scratch;
    }

    /// A word (`[A-Za-z0-9_.$-]+`) at `i`; returns where lexing goes on.
    fn word(&mut self, i: usize) -> usize {
        let text = self.text;
        // At most MAX_VALUE bytes (the rest is the next word): the lexer's loop comes round
        // to a checkpoint at least that often, however long a run of word bytes.
        let limit = text.len().min(i + MAX_VALUE);
        let mut j = i;
        while j < limit && is_word(text[j]) {
            j += 1;
        }
        // A flag's value, or an `ENV NAME value` value: the whole shell word.
        match self.pending {
            // Another flag is not a value.
            _ if text[i] == b'-' => self.pending = Pending::None,
            Pending::Next(key, secret_flag) => {
                let e = self.shell_word_end(i);
                self.pending = Pending::None;
                self.key = None;
                self.words += 1;
                self.emit_word(key, i, e, secret_flag);
                return e;
            }
            Pending::UserColon(key) => {
                let e = self.shell_word_end(i);
                self.pending = Pending::None;
                self.key = None;
                self.words += 1;
                if let Some(c) = memchr::memchr(b':', &text[i..e]) {
                    self.emit_word(key, i + c + 1, e, true);
                }
                return e;
            }
            Pending::None => {}
        }
        let first = self.words == 0;
        self.words += 1;
        if text[i] == b'-' && !self.assigned {
            return self.flag(i, j);
        }
        if first {
            // `sudo`, `env`, `exec` and `xargs` run the next word.
            let w = &text[i..j];
            // A shell history's line number (`  512  mysql -p...`) and a prompt's `$` come
            // before the command too.
            let numbered = w.iter().all(u8::is_ascii_digit);
            if !numbered
                && !matches!(
                    w,
                    b"sudo" | b"env" | b"exec" | b"xargs" | b"time" | b"nohup" | b"$"
                )
            {
                self.command = SECRET_FLAGS
                    .iter()
                    .flat_map(|f| f.programs.iter())
                    .find(|p| p.as_bytes() == w)
                    .copied();
            } else {
                self.words = 0;
            }
            self.env_line = matches!(w, b"ENV" | b"ARG");
            self.key = Some((i, j));
            self.assigned = false;
            return j;
        }
        if self.env_line && self.words == 2 {
            // `ENV NAME value` (not `ENV NAME=value`: the `=` makes it an assignment).
            let mut k = j;
            while k < text.len() && is_space(text[k]) {
                k += 1;
            }
            if k > j && k < text.len() && text[k] != b'=' && text[k] != b'\n' {
                self.pending = Pending::Next((i, j), false);
                self.key = None;
                return k;
            }
        }
        if self.key.is_some() && !self.assigned && matches!(&text[i..j], b"to" | b"is") {
            // Prose and Markdown: "set the api_token to `<value>`", "the password is
            // '<value>'": a delimited value (quoted, backticks) after the name is its value.
            self.assigned = true;
            self.prose_assigned = true;
            return j;
        }
        if self.key.is_some() && self.assigned {
            // An unquoted value: the keyword rule's regex reads those; it ends the context.
            self.key = None;
            self.assigned = false;
            return j;
        }
        self.key = Some((i, j));
        self.assigned = false;
        j
    }

    /// A word starting with `-` at `i..j` (not after an assignment operator).
    fn flag(&mut self, i: usize, j: usize) -> usize {
        let text = self.text;
        let flag = &text[i..j];
        // `--name=value`: a name and its assignment, read as such.
        if flag.starts_with(b"--") && flag.len() > 2 {
            self.key = Some((i, j));
            self.assigned = false;
            if text.get(j) != Some(&b'=') && j < text.len() && is_space(text[j]) {
                self.pending = Pending::Next((i, j), false);
            }
            return j;
        }
        self.key = None;
        self.assigned = false;
        let e = self.shell_word_end(i);
        for f in SECRET_FLAGS {
            if !self.command.is_some_and(|c| f.programs.contains(&c)) {
                continue;
            }
            let fl = f.flag.as_bytes();
            if !text[i..e].starts_with(fl) {
                continue;
            }
            let glued = e > i + fl.len();
            // Glued to a quoted value (`mysql -p'a;b'`, `-p"a b"`): the string that follows
            // is the value, whatever it holds.
            if matches!(f.form, FlagForm::Glued | FlagForm::GluedOrNext)
                && e == i + fl.len()
                && matches!(text.get(e), Some(b'\'' | b'"'))
            {
                self.pending = Pending::Next((i, e), true);
                return e;
            }
            match f.form {
                FlagForm::Glued | FlagForm::GluedOrNext if glued => {
                    self.emit_word((i, i + fl.len()), i + fl.len(), e, true);
                    return e;
                }
                FlagForm::GluedOrNext if e == i + fl.len() => {
                    self.pending = Pending::Next((i, e), true);
                    return e;
                }
                FlagForm::UserColonSecret if e == i + fl.len() => {
                    self.pending = Pending::UserColon((i, e));
                    return e;
                }
                _ => {}
            }
        }
        j
    }

    /// A `"` or `'` string at `q`; an unclosed one leaves its dead zone (per quote kind).
    fn quoted(&mut self, q: usize, quote: u8) -> usize {
        let dead = if quote == b'"' {
            self.dead_dq
        } else {
            self.dead_sq
        };
        if q < dead {
            self.punct();
            return q + 1;
        }
        match self.read_escaped(q, quote) {
            Ok(close) => {
                self.string_value(q + 1, close, Ctx::Quoted);
                close + 1
            }
            Err(stop) => {
                if quote == b'"' {
                    self.dead_dq = stop;
                } else {
                    self.dead_sq = stop;
                }
                self.punct();
                q + 1
            }
        }
    }

    /// Reads a string opened at `q` by `quote`, with backslash escapes, on one line, into
    /// `self.scratch`: the offset of its closing quote, or where the search stopped.
    fn read_escaped(&mut self, q: usize, quote: u8) -> Result<usize, usize> {
        let text = self.text;
        let limit = text.len().min(q + 1 + MAX_VALUE);
        let u = &mut self.scratch;
        u.bytes.clear();
        u.starts.clear();
        u.ends.clear();
        let mut j = q + 1;
        while j < limit {
            let b = text[j];
            if b == quote {
                return Ok(j);
            }
            if b == b'\n' {
                return Err(j);
            }
            if b != b'\\' {
                u.push(b, j, j + 1);
                j += 1;
                continue;
            }
            let Some(&c) = text.get(j + 1) else {
                return Err(j + 1);
            };
            let simple = match c {
                b'n' => Some(b'\n'),
                b't' => Some(b'\t'),
                b'r' => Some(b'\r'),
                b'b' => Some(8),
                b'f' => Some(12),
                b'0' => Some(0),
                b'"' | b'\'' | b'\\' | b'/' | b'`' => Some(c),
                _ => None,
            };
            if let Some(v) = simple {
                u.push(v, j, j + 2);
                j += 2;
                continue;
            }
            if c == b'u' || c == b'x' {
                let digits = if c == b'u' { 4 } else { 2 };
                if let Some(h) = text.get(j + 2..j + 2 + digits).and_then(hex_value) {
                    let mut end = j + 2 + digits;
                    let mut cp = h;
                    // A UTF-16 surrogate pair: `\uD83D\uDE00`.
                    if c == b'u'
                        && (0xD800..0xDC00).contains(&h)
                        && text.get(end..end + 2) == Some(b"\\u")
                        && let Some(lo) = text.get(end + 2..end + 6).and_then(hex_value)
                        && (0xDC00..0xE000).contains(&lo)
                    {
                        cp = 0x10000 + ((h - 0xD800) << 10) + (lo - 0xDC00);
                        end += 6;
                    }
                    u.push_char(char::from_u32(cp).unwrap_or('\u{FFFD}'), j, end);
                    j = end;
                    continue;
                }
            }
            // An unknown escape, or a line continuation: kept as written.
            u.push(b'\\', j, j + 1);
            j += 1;
        }
        Err(j)
    }

    /// A string's content `s..e` (read into `self.scratch`): the value of the pending
    /// assignment or flag, else a name that may be assigned a value (`"password": ...`).
    fn string_value(&mut self, s: usize, e: usize, ctx: Ctx) {
        if let Pending::UserColon(key) = self.pending {
            // `-u "user:secret"`: the part after the first `:` (unescaped, mapped back).
            self.pending = Pending::None;
            self.key = None;
            self.assigned = false;
            self.words += 1;
            if let Some(c) = memchr::memchr(b':', &self.scratch.bytes) {
                let u = std::mem::take(&mut self.scratch);
                let rest = Unescaped {
                    bytes: u.bytes[c + 1..].to_vec(),
                    starts: u.starts[c + 1..].to_vec(),
                    ends: u.ends[c + 1..].to_vec(),
                };
                let vs = u.ends[c];
                let changed = rest.bytes.as_slice() != &self.text[vs..e];
                (self.emit)(&Value {
                    key: Some(key),
                    start: vs,
                    end: e,
                    ctx,
                    unescaped: changed.then_some(&rest),
                    secret_flag: true,
                });
                self.scratch = u;
            }
            return;
        }
        let (key, secret_flag) = match self.pending {
            Pending::Next(k, f) => (Some(k), f),
            // "set the token to `your token here`": a phrase, not a value.
            _ if self.assigned
                && self.prose_assigned
                && self.scratch.bytes.iter().any(u8::is_ascii_whitespace) =>
            {
                (None, false)
            }
            _ if self.assigned => (self.key, false),
            _ => (None, false),
        };
        self.pending = Pending::None;
        self.words += 1;
        self.emit_scratch_flag(key, s, e, ctx, secret_flag);
        if key.is_some() {
            self.key = None;
            self.assigned = false;
        } else {
            self.key = (e - s <= MAX_NAME).then_some((s, e));
            self.assigned = false;
        }
    }

    /// A Go raw string at `q`: no escapes, may span lines.
    fn backtick(&mut self, q: usize) -> usize {
        if q < self.dead_bt {
            self.punct();
            return q + 1;
        }
        let text = self.text;
        let limit = text.len().min(q + 1 + MAX_VALUE);
        match memchr::memchr(b'`', &text[q + 1..limit]) {
            Some(k) => {
                let close = q + 1 + k;
                self.fill_verbatim(q + 1, close, false);
                self.string_value(q + 1, close, Ctx::Backtick);
                close + 1
            }
            None => {
                self.dead_bt = limit;
                self.punct();
                q + 1
            }
        }
    }

    /// A C# verbatim string at `at` (`@"`): `""` is a quote, may span lines.
    fn verbatim(&mut self, at: usize) -> usize {
        let q = at + 1;
        if q < self.dead_vb {
            self.punct();
            return q + 1;
        }
        let text = self.text;
        let limit = text.len().min(q + 1 + MAX_VALUE);
        let mut j = q + 1;
        loop {
            match memchr::memchr(b'"', &text[j..limit]) {
                Some(k) if text.get(j + k + 1) == Some(&b'"') => j += k + 2,
                Some(k) => {
                    let close = j + k;
                    self.fill_verbatim(q + 1, close, true);
                    self.string_value(q + 1, close, Ctx::Verbatim);
                    return close + 1;
                }
                None => {
                    self.dead_vb = limit;
                    self.note_hold(at, limit);
                    self.punct();
                    return q + 1;
                }
            }
            if j >= limit {
                self.dead_vb = limit;
                self.note_hold(at, limit);
                self.punct();
                return q + 1;
            }
        }
    }

    /// `text[s..e]` into the scratch, `""` read as `"` when `doubled`.
    fn fill_verbatim(&mut self, s: usize, e: usize, doubled: bool) {
        let text = self.text;
        let u = &mut self.scratch;
        u.bytes.clear();
        u.starts.clear();
        u.ends.clear();
        let mut j = s;
        while j < e {
            if doubled && text[j] == b'"' && j + 1 < e && text[j + 1] == b'"' {
                u.push(b'"', j, j + 2);
                j += 2;
            } else {
                u.push(text[j], j, j + 1);
                j += 1;
            }
        }
    }

    /// An XML tag at `lt`: its attributes' values, and for an opening tag the element's text
    /// when a closing tag follows it.
    fn tag(&mut self, lt: usize) -> usize {
        self.punct();
        let text = self.text;
        if lt < self.dead_lt {
            return lt + 1;
        }
        let name_start = lt + 1;
        let mut j = name_start;
        while j < text.len() && j - name_start < MAX_NAME && is_name(text[j]) {
            j += 1;
        }
        if j == name_start || !text[name_start].is_ascii_alphabetic() {
            return lt + 1;
        }
        let name = (name_start, j);
        let limit = text.len().min(lt + MAX_VALUE);
        // Attributes, and the `key`/`name` attribute that names a later `value` attribute.
        let mut named: Option<(usize, usize)> = None;
        loop {
            while j < limit && text[j].is_ascii_whitespace() {
                j += 1;
            }
            if j >= limit {
                self.dead_lt = j;
                return j;
            }
            match text[j] {
                b'>' => break,
                b'/' if text.get(j + 1) == Some(&b'>') => return j + 2,
                b'?' if text.get(j + 1) == Some(&b'>') => return j + 2,
                _ => {}
            }
            let an = j;
            while j < limit && is_name(text[j]) {
                j += 1;
            }
            if j == an {
                return j.max(lt + 1);
            }
            let attr = (an, j);
            while j < limit && is_space(text[j]) {
                j += 1;
            }
            if text.get(j) != Some(&b'=') {
                // `<option selected>`: an attribute without a value.
                continue;
            }
            j += 1;
            while j < limit && is_space(text[j]) {
                j += 1;
            }
            let Some(&quote) = text.get(j).filter(|q| matches!(q, b'"' | b'\'')) else {
                return j.max(lt + 1);
            };
            let vs = j + 1;
            let Some(k) = memchr::memchr2(quote, b'\n', &text[vs..limit.max(vs)]) else {
                self.dead_lt = limit;
                return limit;
            };
            let ve = vs + k;
            if text[ve] != quote {
                return ve;
            }
            j = ve + 1;
            let an_bytes = &text[attr.0..attr.1];
            if an_bytes.eq_ignore_ascii_case(b"key") || an_bytes.eq_ignore_ascii_case(b"name") {
                named = Some((vs, ve));
            }
            self.fill_entities(vs, ve);
            self.emit_scratch(Some(attr), vs, ve, Ctx::XmlAttribute);
            if an_bytes.eq_ignore_ascii_case(b"value")
                && let Some(k) = named
            {
                self.fill_entities(vs, ve);
                self.emit_scratch(Some(k), vs, ve, Ctx::XmlAttribute);
            }
        }
        self.element_text(lt, name, j + 1)
    }

    /// The text from `cs` of the element `name` opened at `lt`, up to the next `<` if it is
    /// this element's end tag; returns where lexing goes on.
    fn element_text(&mut self, lt: usize, name: (usize, usize), cs: usize) -> usize {
        let text = self.text;
        let climit = text.len().min(cs + MAX_VALUE);
        let nm = &text[name.0..name.1];
        let Some(k) = memchr::memchr(b'<', &text[cs.min(climit)..climit]) else {
            // The element's text may go on past the end.
            self.hold_element(lt, nm, cs, climit);
            if climit == text.len() {
                self.dead_el = climit;
            }
            return cs;
        };
        let ce = cs + k;
        let end_tag = &text[ce..];
        if end_tag.len() <= nm.len() + 2 {
            // The text ends in what may become the end tag.
            self.hold_element(lt, nm, cs, text.len());
            self.dead_el = text.len();
        }
        if end_tag.len() > nm.len() + 2 && end_tag[1] == b'/' && &end_tag[2..2 + nm.len()] == nm {
            let raw = &text[cs..ce];
            let s = cs + (raw.len() - raw.trim_ascii_start().len());
            let e = ce - (raw.len() - raw.trim_ascii_end().len());
            if s < e {
                self.fill_entities(s, e);
                self.emit_scratch(Some(name), s, e, Ctx::XmlElement);
            }
            return ce;
        }
        cs
    }

    /// An element `<nm>` at `lt` whose text from `cs` is open at `stop`: held when its value
    /// will be judged (its name names a secret, or its text holds an entity).
    fn hold_element(&mut self, lt: usize, nm: &[u8], cs: usize, stop: usize) {
        if stop >= self.text.len()
            && (super::scan::names_a_secret(nm) || memchr::memchr(b'&', &self.text[cs..]).is_some())
        {
            self.note_hold(lt, stop);
        }
    }

    /// `text[s..e]` into the scratch with XML entities (`&amp;`, `&#65;`, `&#x41;`) decoded.
    fn fill_entities(&mut self, s: usize, e: usize) {
        let text = self.text;
        let u = &mut self.scratch;
        u.bytes.clear();
        u.starts.clear();
        u.ends.clear();
        let mut j = s;
        while j < e {
            if text[j] == b'&'
                && let Some(k) = memchr::memchr(b';', &text[j + 1..e.min(j + 12)])
            {
                let ent = &text[j + 1..j + 1 + k];
                let end = j + k + 2;
                let c = match ent {
                    b"amp" => Some('&'),
                    b"lt" => Some('<'),
                    b"gt" => Some('>'),
                    b"quot" => Some('"'),
                    b"apos" => Some('\''),
                    [b'#', b'x' | b'X', hex @ ..] => hex_value(hex).and_then(char::from_u32),
                    [b'#', dec @ ..] => std::str::from_utf8(dec)
                        .ok()
                        .and_then(|d| d.parse::<u32>().ok())
                        .and_then(char::from_u32),
                    _ => None,
                };
                if let Some(c) = c {
                    u.push_char(c, j, end);
                    j = end;
                    continue;
                }
            }
            u.push(text[j], j, j + 1);
            j += 1;
        }
    }
}

/// A byte that ends a shell word outside quotes: whitespace, an operator, a backtick (a
/// command substitution, or a Markdown code span around a command).
fn is_shell_sep(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b';' | b'|' | b'&' | b'<' | b'>' | b'(' | b')' | b'`')
}

/// Words that shell quoting joins out of pieces (`gh''p_<rest>`, `"ghp_"'<rest>'`,
/// `TOKEN=ab"cd"`, `gh\p_<rest>`), read after quote removal as `sh` would: each such word's
/// value (after a `NAME=` prefix, if any) is emitted unescaped, every byte mapped back to the
/// text, so that the rules see the joined token and a finding redacts the quoted original.
/// The value is named by its `NAME=` prefix or by the `-flag` word before it
/// (`--token gh''p_<rest>`). Values holding an expansion (`$`, backticks in `"..."`),
/// whitespace, or shorter than 8 bytes, and words that are one quoted string (the tokenizer
/// and the rules read those as they are) are not emitted.
///
/// Linear: the text is searched for quotes and backslashes; each hit's word is read forward
/// once from its start (found backwards no further than the last word read), a quoted string
/// stops at its line's end, and reading resumes past where the word's reading stopped.
pub fn shell_words_in(text: &[u8], emit: &mut dyn FnMut(&Value)) {
    let n = text.len();
    let mut u = Unescaped::default();
    let mut pos = 0;
    while pos < n {
        let Some(q) = memchr::memchr3(b'\'', b'"', b'\\', &text[pos..]).map(|i| pos + i) else {
            break;
        };
        let lo = pos.max(q.saturating_sub(MAX_VALUE));
        let mut ws = q;
        while ws > lo && !is_shell_sep(text[ws - 1]) {
            ws -= 1;
        }
        let word = read_shell_word(text, ws, &mut u);
        pos = word.end.max(q + 1);
        if !word.complete
            || word.expands
            || word.pieces < 2
            || u.bytes.len() < 8
            || u.bytes.iter().any(u8::is_ascii_whitespace)
        {
            continue;
        }
        let key = word.name.or_else(|| {
            // The word before, on the same line, if it is a flag (`--token`, `-p`).
            let floor = lo.max(ws.saturating_sub(MAX_NAME));
            let mut fe = ws;
            while fe > floor && matches!(text[fe - 1], b' ' | b'\t') {
                fe -= 1;
            }
            let mut fs = fe;
            while fs > floor && !is_shell_sep(text[fs - 1]) {
                fs -= 1;
            }
            (fe > fs && text[fs] == b'-' && !text[fs..fe].contains(&b'=')).then_some((fs, fe))
        });
        // From the value's first byte to its last, as a quoted token's rule finds it.
        let (Some(&start), Some(&end)) = (u.starts.first(), u.ends.last()) else {
            continue;
        };
        emit(&Value {
            key,
            start,
            end,
            ctx: Ctx::Word,
            unescaped: Some(&u),
            secret_flag: false,
        });
    }
}

/// A `'...'` string at `q` (on one line, before `limit`) pushed to `u` as written: the
/// offset of its closing quote, or where the search stopped.
fn read_single_quoted(
    text: &[u8],
    q: usize,
    limit: usize,
    u: &mut Unescaped,
) -> Result<usize, usize> {
    let Some(c) = memchr::memchr2(b'\'', b'\n', &text[q + 1..limit]).map(|i| q + 1 + i) else {
        return Err(limit);
    };
    if text[c] == b'\n' {
        return Err(c);
    }
    for (k, &b) in text[q + 1..c].iter().enumerate() {
        let at = q + 1 + k;
        u.push(b, at, at + 1);
    }
    Ok(c)
}

/// A `"..."` string at `q` (on one line, before `limit`) pushed to `u` after removing the
/// backslashes of `\\`, `\"`, `\$`, `` \` ``; `expands` is set by a `$` or a backtick.
fn read_double_quoted(
    text: &[u8],
    q: usize,
    limit: usize,
    u: &mut Unescaped,
    expands: &mut bool,
) -> Result<usize, usize> {
    let mut k = q + 1;
    loop {
        if k >= limit || text[k] == b'\n' {
            return Err(k);
        }
        match text[k] {
            b'"' => return Ok(k),
            b'\\' if k + 1 < limit && matches!(text[k + 1], b'\\' | b'"' | b'$' | b'`') => {
                u.push(text[k + 1], k, k + 2);
                k += 2;
            }
            c => {
                *expands |= c == b'$' || c == b'`';
                u.push(c, k, k + 1);
                k += 1;
            }
        }
    }
}

/// What [`read_shell_word`] read.
struct ShellWord {
    /// Where reading stopped: the word's end, or where an unclosed quote's search stopped.
    end: usize,
    /// The word ended (not cut by an unclosed quote, a line continuation or the length bound).
    complete: bool,
    /// A `$` or a backtick outside single quotes: the value is not known.
    expands: bool,
    /// Pieces of the value: unquoted runs, quoted strings, backslash escapes.
    pieces: u32,
    /// `NAME` of a `NAME=value` word (unquoted).
    name: Option<(usize, usize)>,
}

/// Reads the shell word at `ws` into `u` after quote removal (`'...'` literal, `"..."` with
/// `\\`, `\"`, `\$`, `` \` `` escapes, `\x` outside quotes), on one line, at most
/// [`MAX_VALUE`] bytes; after an unquoted `NAME=`, `u` holds the value only.
fn read_shell_word(text: &[u8], ws: usize, u: &mut Unescaped) -> ShellWord {
    u.bytes.clear();
    u.starts.clear();
    u.ends.clear();
    let limit = text.len().min(ws + MAX_VALUE);
    let mut w = ShellWord {
        end: ws,
        complete: false,
        expands: false,
        pieces: 0,
        name: None,
    };
    // Whether the last piece is an unquoted run; whether only name bytes came so far.
    let mut plain = false;
    let mut name_only = true;
    let mut j = ws;
    while j < limit {
        let b = text[j];
        if is_shell_sep(b) {
            w.end = j;
            w.complete = true;
            return w;
        }
        match b {
            b'\'' | b'"' => {
                let read = if b == b'"' {
                    read_double_quoted(text, j, limit, u, &mut w.expands)
                } else {
                    read_single_quoted(text, j, limit, u)
                };
                let close = match read {
                    Ok(close) => close,
                    Err(stop) => {
                        w.end = stop;
                        return w;
                    }
                };
                w.pieces += 1;
                plain = false;
                name_only = false;
                j = close + 1;
            }
            b'\\' => {
                if j + 1 >= limit || text[j + 1] == b'\n' {
                    w.end = j;
                    return w;
                }
                u.push(text[j + 1], j, j + 2);
                w.pieces += 1;
                plain = false;
                name_only = false;
                j += 2;
            }
            b'=' if name_only && w.name.is_none() && j > ws => {
                // `NAME=value`: the value is what follows.
                w.name = Some((ws, j));
                u.bytes.clear();
                u.starts.clear();
                u.ends.clear();
                w.pieces = 0;
                plain = false;
                j += 1;
            }
            _ => {
                w.expands |= b == b'$';
                name_only &= b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
                if !plain {
                    w.pieces += 1;
                    plain = true;
                }
                u.push(b, j, j + 1);
                j += 1;
            }
        }
    }
    w.end = j;
    w.complete = j == text.len();
    w
}

fn is_name(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')
}

/// The value of 1 to 6 hex digits.
fn hex_value(h: &[u8]) -> Option<u32> {
    if h.is_empty() || h.len() > 6 || !h.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
}
