//! The keyword prefilter: where in a text does some rule's keyword occur?
//!
//! A general Aho-Corasick automaton over all ~160 keywords runs at ~600 MB/s here, which is
//! most of a scan. Instead, the keywords are covered by a small set of *anchors* (substrings
//! of them, at most 48 per search) found with aho-corasick's SIMD `packed` (Teddy) searcher at
//! several GB/s: case-insensitive keywords in an ASCII-lowercased copy of the text, exact-case
//! keywords (token prefixes) in the text itself. Each anchor hit is then checked against the
//! keywords that contain the anchor. Where Teddy is unavailable (no SSSE3), a DFA over the
//! keywords does the same job. With the `vectorscan` feature (the default), one Vectorscan
//! pass per block finds every anchor of both spaces instead (module [`vectorscan`] below),
//! and Teddy is its fallback.

use super::rules::RULES;
use aho_corasick::packed::{Config, MatchKind as PackedKind, Searcher};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, Input, MatchKind};
use std::cell::RefCell;

/// One keyword of one rule.
struct Keyword {
    rule: usize,
    /// As searched: lowercase in the folded space, exact otherwise.
    text: Vec<u8>,
    /// Must match with its exact case in the original text.
    exact: bool,
    /// The keyword as written in the rule.
    orig: &'static [u8],
}

/// Anchors of one search space (folded or exact text).
struct Space {
    keywords: Vec<Keyword>,
    /// Per anchor: (keyword index, offset of the anchor in the keyword).
    anchors: Vec<Vec<(usize, usize)>>,
    /// Teddy refuses more than 64 patterns: the anchors are split over several searchers,
    /// each with the global index of its patterns. Empty: Teddy is unavailable here.
    searchers: Vec<(Searcher, Vec<usize>)>,
    /// Keywords of one or two bytes (`AC`, `SK`): found with `memmem`, which is fast for
    /// them, rather than forcing the packed searcher down to two-byte fingerprints.
    short: Vec<memchr::memmem::Finder<'static>>,
    short_anchors: Vec<Vec<(usize, usize)>>,
    /// Fallback: a DFA over the keywords themselves (pattern id = keyword index).
    dfa: Option<AhoCorasick>,
    /// Per anchor: `Some(b)` when the anchor and every keyword holding it are runs of the one
    /// byte `b` (the Twitter bearer token's `AAAA...`) and their case is checked in this
    /// space itself: a run of `b` in the text is then reported as one hit spanning it, and
    /// the search resumes at its end, rather than once per byte of it.
    run_anchor: Vec<Option<u8>>,
    /// Per anchor: its length.
    anchor_len: Vec<usize>,
    /// The case-folded space (keywords lowercase, compared in any case).
    folded: bool,
    /// The anchors themselves and the short (memmem) ones, for the Vectorscan database.
    #[cfg(feature = "vectorscan")]
    texts: [Vec<Vec<u8>>; 2],
}

#[cfg(test)]
/// The `packed` searcher's limit.
const MAX_ANCHORS: usize = 160;

#[cfg(test)]
/// How common a byte is in source code and program output (higher: more common), for
/// choosing rare anchors: an anchor that occurs often costs a candidate check each time.
fn commonness(b: u8) -> u32 {
    match b {
        b' ' | b'\n' | b'\t' => 10,
        b'e' | b't' | b'a' | b'o' | b'i' | b'n' | b's' | b'r' => 8,
        b'l' | b'c' | b'd' | b'u' | b'h' | b'p' | b'm' | b'-' => 7,
        b'f' | b'g' | b'b' | b'y' | b'w' | b'v' | b'_' | b'.' | b'/' | b'=' | b'"' | b','
        | b'(' | b')' | b'*' => 6,
        b'E' | b'T' | b'A' | b'O' | b'I' | b'N' | b'S' | b'R' | b'L' | b'C' | b'D' | b'0'
        | b'1' | b':' | b'#' | b'{' | b'}' | b';' | b'\'' => 5,
        b'k' | b'x' | b'j' | b'q' | b'z' | b'<' | b'>' => 4,
        b'A'..=b'Z' | b'0'..=b'9' => 4,
        _ => 3,
    }
}

#[cfg(test)]
/// Lower is rarer: how often a string is expected, as the sum over its bytes of
/// `commonness - 11` (each byte makes it rarer; common bytes less so), with runs of one byte
/// (`----`) counting as common.
fn anchor_cost(a: &[u8]) -> i32 {
    let mut c: i32 = a.iter().map(|&b| commonness(b) as i32 - 11).sum();
    c += 4 * a.windows(2).filter(|w| w[0] == w[1]).count() as i32;
    c
}

#[cfg(test)]
/// Chooses anchors covering every keyword: a greedy set cover over substrings of `len`
/// bytes (whole keywords when shorter), preferring the rarest; then, while there are too
/// many, anchors sharing a three-byte prefix are merged into it. Anchors containing another
/// anchor are dropped (the shorter one finds the same places).
fn choose_anchors(keywords: &[Vec<u8>], len: usize) -> Vec<Vec<u8>> {
    let mut uncovered: Vec<&Vec<u8>> = keywords.iter().collect();
    let mut anchors: Vec<Vec<u8>> = Vec::new();
    while !uncovered.is_empty() {
        let mut best: Option<(usize, i32, Vec<u8>)> = None;
        for k in &uncovered {
            let lo = len.min(k.len());
            let hi = (len + 2).min(k.len());
            for w in (lo..=hi).flat_map(|l| k.windows(l)) {
                let covers = uncovered.iter().filter(|u| contains(u, w)).count();
                let cost = anchor_cost(w);
                let better = match &best {
                    None => true,
                    Some((c, bc, b)) => {
                        covers > *c
                            || (covers == *c && (cost < *bc || (cost == *bc && w < b.as_slice())))
                    }
                };
                if better {
                    best = Some((covers, cost, w.to_vec()));
                }
            }
        }
        let Some((_, _, a)) = best else { break };
        uncovered.retain(|u| !contains(u, &a));
        anchors.push(a);
    }
    while anchors.len() > MAX_ANCHORS {
        let mut counts: Vec<(Vec<u8>, usize)> = Vec::new();
        for a in anchors.iter().filter(|a| a.len() > 3) {
            let p = a[..3].to_vec();
            match counts.iter_mut().find(|(q, _)| *q == p) {
                Some((_, c)) => *c += 1,
                None => counts.push((p, 1)),
            }
        }
        let Some((p, n)) = counts.into_iter().max_by_key(|(_, c)| *c) else {
            break;
        };
        if n < 2 {
            break;
        }
        anchors.retain(|a| !(a.len() > 3 && a[..3] == p[..]));
        anchors.push(p);
    }
    let all = anchors.clone();
    anchors.retain(|a| !all.iter().any(|b| b != a && contains(a, b)));
    anchors.sort();
    anchors.dedup();
    anchors
}

#[cfg(test)]
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// The keywords of a space (see [`Space::new`]): (rule, as searched, exact-case, original).
fn space_keywords(folded: bool) -> Vec<Keyword> {
    let mut keywords = Vec::new();
    for (i, r) in RULES.iter().enumerate() {
        for k in r.keywords {
            let b = k.as_bytes();
            let lower_only = !b.iter().any(u8::is_ascii_uppercase);
            let here = if folded {
                !r.case_sensitive || lower_only
            } else {
                r.case_sensitive && !lower_only
            };
            if here {
                keywords.push(Keyword {
                    rule: i,
                    text: if folded {
                        b.to_ascii_lowercase()
                    } else {
                        b.to_vec()
                    },
                    exact: r.case_sensitive,
                    orig: b,
                });
            }
        }
    }
    keywords
}

#[cfg(test)]
/// The anchors the set cover chooses now, for (folded, exact): the tables below must equal
/// them (a test checks; computing them at start-up would cost milliseconds per process).
pub fn computed_anchors() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let long = |folded: bool| {
        let mut v: Vec<Vec<u8>> = space_keywords(folded)
            .into_iter()
            .filter(|k| k.text.len() > 2)
            .map(|k| k.text)
            .collect();
        v.sort();
        v.dedup();
        choose_anchors(&v, 4)
    };
    (long(true), long(false))
}

/// Per anchor: the byte `b` when the anchor and every keyword holding it are runs of `b`
/// whose case this space checks itself (see `Space::run_anchor`).
fn run_anchors(
    anchors: &[Vec<u8>],
    map: &[Vec<(usize, usize)>],
    keywords: &[Keyword],
    folded: bool,
) -> Vec<Option<u8>> {
    anchors
        .iter()
        .zip(map)
        .map(|(a, list)| {
            let b = *a.first()?;
            let run = |t: &[u8]| t.iter().all(|&x| x == b);
            (run(a)
                && !list.is_empty()
                && list.iter().all(|&(ki, _)| {
                    let k = &keywords[ki];
                    run(&k.text) && (!folded || !k.exact)
                }))
            .then_some(b)
        })
        .collect()
}

impl Space {
    /// `folded`: the space of case-insensitive keywords and of exact keywords without
    /// uppercase letters (checked for exact case on a hit); else the exact keywords with
    /// uppercase letters.
    fn new(folded: bool) -> Space {
        let keywords = space_keywords(folded);
        let mut short: Vec<Vec<u8>> = keywords
            .iter()
            .filter(|k| k.text.len() <= 2)
            .map(|k| k.text.clone())
            .collect();
        short.sort();
        short.dedup();
        let table = if folded {
            ANCHORS_FOLDED
        } else {
            ANCHORS_EXACT
        };
        let anchors: Vec<Vec<u8>> = table.iter().map(|a| a.as_bytes().to_vec()).collect();
        // anchor → (keyword, offset) for every place an anchor occurs in a keyword: each
        // window of each keyword is looked up in the sorted anchors (no per-pair search).
        let map = |list: &[Vec<u8>]| -> Vec<Vec<(usize, usize)>> {
            let mut sorted: Vec<(&[u8], usize)> = list
                .iter()
                .enumerate()
                .map(|(i, a)| (a.as_slice(), i))
                .collect();
            sorted.sort();
            let mut lens: Vec<usize> = list.iter().map(Vec::len).collect();
            lens.sort();
            lens.dedup();
            let mut out = vec![Vec::new(); list.len()];
            for (ki, k) in keywords.iter().enumerate() {
                for &l in &lens {
                    for (off, w) in k.text.windows(l).enumerate() {
                        // Only the anchor's first place in the keyword: the searcher
                        // reports every position where the anchor occurs, so each keyword
                        // occurrence is found once (a keyword made of one repeated byte,
                        // `AAAA...`, would otherwise be reported once per place, ~16 times
                        // per byte of a run of `A`).
                        if let Ok(j) = sorted.binary_search_by(|(a, _)| (*a).cmp(w))
                            && !out[sorted[j].1].iter().any(|&(k, _)| k == ki)
                        {
                            out[sorted[j].1].push((ki, off));
                        }
                    }
                }
            }
            out
        };
        // Teddy checks a fingerprint of the first min(4, shortest pattern) bytes: one
        // three-byte anchor among four-byte ones makes every candidate check looser. So the
        // three-byte anchors get their own searcher (measured on source code, 2.3x faster than
        // two or three searchers of up to 64 mixed anchors), and the rest are split into
        // searchers of at most 48: four passes over the folded text (~37 anchors each, "fat"
        // Teddy) rather than five of at most 32. Measured on source code and on log lines
        // (`yes 'build step 42 ...'`) in 32 KiB blocks, same runs: the folded passes 1.4-1.9x
        // faster (fewer passes outweigh the looser fingerprint; 64 was no better than 48).
        const PER_SEARCHER: usize = 48;
        let mut searchers = Vec::new();
        //
        // An anchor whose tail is a run of one byte after a different first byte (`:AA`) is
        // searched with `memmem` instead, like the short keywords: Teddy checks nibbles, and
        // its fingerprint let every byte of a run of `A` (base64 of zeros) through for `:AA`
        // (its searcher ran at ~190 MB/s there against ~23 GB/s without it); `memmem` keys on
        // the rarer `:`.
        let by_memmem =
            |a: &[u8]| a.len() >= 3 && a[0] != a[1] && a[1..].iter().all(|&b| b == a[1]);
        short.extend(anchors.iter().filter(|a| by_memmem(a)).cloned());
        let teddy = |i: &usize| !by_memmem(&anchors[*i]);
        let classes: [Vec<usize>; 2] = [
            (0..anchors.len())
                .filter(teddy)
                .filter(|&i| anchors[i].len() < 4)
                .collect(),
            (0..anchors.len())
                .filter(teddy)
                .filter(|&i| anchors[i].len() >= 4)
                .collect(),
        ];
        'build: for class in classes.iter().filter(|c| !c.is_empty()) {
            let groups = class.len().div_ceil(PER_SEARCHER);
            let per = class.len().div_ceil(groups);
            for ids in class.chunks(per) {
                match Config::new()
                    .match_kind(PackedKind::LeftmostFirst)
                    .builder()
                    .extend(ids.iter().map(|&i| &anchors[i]))
                    .build()
                {
                    Some(s) => searchers.push((s, ids.to_vec())),
                    None => {
                        searchers.clear();
                        break 'build;
                    }
                }
            }
        }
        let dfa = if searchers.is_empty() {
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .kind(Some(AhoCorasickKind::DFA))
                .build(keywords.iter().map(|k| &k.text))
                .ok()
        } else {
            None
        };
        let anchor_map = map(&anchors);
        let run_anchor = run_anchors(&anchors, &anchor_map, &keywords, folded);
        Space {
            anchors: anchor_map,
            run_anchor,
            anchor_len: anchors.iter().map(Vec::len).collect(),
            folded,
            short_anchors: map(&short),
            short: short
                .iter()
                .map(|a| memchr::memmem::Finder::new(a).into_owned())
                .collect(),
            #[cfg(feature = "vectorscan")]
            texts: [anchors, short],
            keywords,
            searchers,
            dfa,
        }
    }

    /// Reports the keywords of `list` (keyword, offset of the anchor in it) that occur in
    /// `orig` with their anchor at `at`: the folded space's keywords in any case (they are
    /// lowercase), exact ones with their case.
    fn check(
        &self,
        list: &[(usize, usize)],
        at: usize,
        orig: &[u8],
        hit: &mut dyn FnMut(usize, usize, usize),
    ) {
        for &(ki, off) in list {
            let k = &self.keywords[ki];
            if at < off {
                continue;
            }
            let start = at - off;
            let end = start + k.text.len();
            if end > orig.len() {
                continue;
            }
            let here = &orig[start..end];
            let found = if self.folded {
                here.eq_ignore_ascii_case(&k.text)
            } else {
                here == &k.text[..]
            };
            if found && (!k.exact || here == k.orig) {
                hit(k.rule, start, end);
            }
        }
    }

    /// A run anchor (a run of `b`, see `run_anchor`) found at `at` in `space`: every keyword
    /// occurrence in the run starting there, as one hit (start, end of the run) — the windows
    /// built from it are those of the occurrences one by one. Returns where to search on: past
    /// the run, less the anchor's length.
    fn run_hit(
        &self,
        ai: usize,
        b: u8,
        at: usize,
        space: &[u8],
        hit: &mut dyn FnMut(usize, usize, usize),
    ) -> usize {
        let r = space[at..]
            .iter()
            .position(|&x| x != b)
            .map_or(space.len(), |i| at + i);
        for &(ki, _) in &self.anchors[ai] {
            let k = &self.keywords[ki];
            if r - at >= k.text.len() {
                hit(k.rule, at, r);
            }
        }
        (r + 1).saturating_sub(self.anchor_len[ai]).max(at + 1)
    }

    /// Calls `hit(rule, start, end)` for every keyword occurrence: `space` is the text
    /// searched (folded or not), `orig` the original text for exact-case checks.
    /// Only keyword occurrences whose anchor starts in `from..to` are reported.
    fn find(
        &self,
        space: &[u8],
        orig: &[u8],
        from: usize,
        to: usize,
        hit: &mut dyn FnMut(usize, usize, usize),
    ) {
        let check =
            |list: &[(usize, usize)], at: usize, hit: &mut dyn FnMut(usize, usize, usize)| {
                self.check(list, at, orig, hit)
            };
        if !self.searchers.is_empty() {
            for (s, ids) in &self.searchers {
                let mut pos = from;
                while pos < to {
                    let Some(m) = s.find(&space[pos..]) else {
                        break;
                    };
                    let at = pos + m.start();
                    if at >= to {
                        break;
                    }
                    let ai = ids[m.pattern().as_usize()];
                    if let Some(b) = self.run_anchor[ai] {
                        pos = self.run_hit(ai, b, at, space, hit);
                        continue;
                    }
                    check(&self.anchors[ai], at, hit);
                    pos = at + 1;
                }
            }
        } else if let Some(ac) = &self.dfa {
            for m in ac.find_overlapping_iter(Input::new(space)) {
                if (from..to).contains(&m.start()) {
                    check(&[(m.pattern().as_usize(), 0)], m.start(), hit);
                }
            }
            return;
        } else if !self.anchors.is_empty() {
            // Neither searcher could be built: slow, but never blind (fail closed).
            for (ki, k) in self.keywords.iter().enumerate() {
                for at in memchr::memmem::find_iter(&space[from..], &k.text) {
                    if from + at >= to {
                        break;
                    }
                    check(&[(ki, 0)], from + at, hit);
                }
            }
            return;
        }
        for (i, a) in self.short.iter().enumerate() {
            for at in a.find_iter(&space[from..]) {
                if from + at >= to {
                    break;
                }
                check(&self.short_anchors[i], from + at, hit);
            }
        }
    }
}

/// The prefilter works block by block, so that the folded copy and every searcher's pass
/// stay in cache.
const BLOCK: usize = 32 * 1024;
/// Blocks overlap by this much, so that keywords cross block edges (each anchor is reported
/// by the block it starts in).
const MARGIN: usize = 64;

/// Both search spaces.
pub struct Prefilter {
    folded: Space,
    exact: Space,
    /// The one-pass engine, when built in and usable here, built once this prefilter has
    /// searched [`VECTORSCAN_AFTER`] bytes; else (and until then) the Teddy passes.
    #[cfg(feature = "vectorscan")]
    vectorscan: vectorscan::Lazy,
}

/// Vectorscan's database takes ~3 ms to compile, which a one-shot `gateway exec` of a
/// command with a page of output would pay on every call (measured: 8.5 → 11.3 ms per call of
/// `exec -- seq 3000`); Teddy searches 4 MiB in about that time. So the first 4 MiB a process
/// searches go to Teddy, and Vectorscan is built for what follows.
#[cfg(feature = "vectorscan")]
const VECTORSCAN_AFTER: usize = 4 << 20;

/// Which engine finds the anchors.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Vectorscan: one pass over the text for every anchor of both spaces.
    #[cfg_attr(not(feature = "vectorscan"), allow(dead_code))]
    Vectorscan,
    /// aho-corasick's Teddy searchers over a lowercased copy and the text, plus `memmem`
    /// passes (a DFA where Teddy is unavailable).
    Teddy,
}

/// Other names the keyword pass finds when it can at no extra cost (the Vectorscan engine
/// holds them in its database): where the scanner would otherwise make passes of its own.
#[derive(Default)]
pub struct Names {
    /// Whether the pass found them (every block searched by Vectorscan); if not, the lists
    /// are empty and the caller searches for them itself.
    pub found: bool,
    /// Occurrences (start, end) of [`super::rules::CAMEL_SECRET_NAMES`], sorted.
    pub camel: Vec<(usize, usize)>,
    /// Starts of the program names the context tokenizer's lines are found by
    /// ([`super::scan::program_trigger_names`]), sorted.
    pub programs: Vec<usize>,
}

impl Prefilter {
    /// Builds the anchors and searchers (~0.1 ms; Vectorscan's database, ~3 ms, once
    /// [`VECTORSCAN_AFTER`] bytes have been searched).
    pub fn new() -> Prefilter {
        Prefilter {
            #[cfg(feature = "vectorscan")]
            vectorscan: vectorscan::Lazy::after(VECTORSCAN_AFTER),
            folded: Space::new(true),
            exact: Space::new(false),
        }
    }

    /// The same prefilter with Vectorscan (when built in and usable) from the first byte.
    #[cfg(test)]
    pub fn eager() -> Prefilter {
        let p = Prefilter {
            #[cfg(feature = "vectorscan")]
            vectorscan: vectorscan::Lazy::after(0),
            ..Prefilter::teddy()
        };
        p.find(b"", &mut |_, _, _| {});
        p
    }

    /// The same prefilter on the Teddy engine only (the fallback), for comparing engines.
    #[cfg(test)]
    pub fn teddy() -> Prefilter {
        Prefilter {
            #[cfg(feature = "vectorscan")]
            vectorscan: vectorscan::Lazy::after(usize::MAX),
            folded: Space::new(true),
            exact: Space::new(false),
        }
    }

    /// The engine in use now.
    #[cfg(test)]
    pub fn engine(&self) -> Engine {
        #[cfg(feature = "vectorscan")]
        if self.vectorscan.get().is_some() {
            return Engine::Vectorscan;
        }
        Engine::Teddy
    }

    #[cfg(test)]
    /// Calls `hit(rule, start, end)` for every keyword occurrence in `text`, once each, in
    /// order of `start` within each block of the text (blocks overlap by at most a keyword's
    /// length: a hit may start up to [`MARGIN`] bytes before the previous block's last one).
    pub fn find(&self, text: &[u8], hit: &mut dyn FnMut(usize, usize, usize)) {
        self.find_with_names(text, hit, &mut Names::default());
    }

    /// [`Prefilter::find`], also filling `names` (see [`Names`]).
    pub fn find_with_names(
        &self,
        text: &[u8],
        hit: &mut dyn FnMut(usize, usize, usize),
        names: &mut Names,
    ) {
        thread_local! {
            static FOLDED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
            static HITS: RefCell<Vec<(usize, usize, usize)>> = const { RefCell::new(Vec::new()) };
        }
        // Block by block, so that the folded copy and every searcher's pass stay in cache;
        // the margins let keywords cross block edges (each anchor is reported by the block it
        // starts in).
        FOLDED.with(|f| {
            let mut f = f.borrow_mut();
            let mut hits = HITS.with(|h| std::mem::take(&mut *h.borrow_mut()));
            let scratch = self.scratch(text.len());
            names.camel.clear();
            names.programs.clear();
            names.found = scratch.is_some();
            let mut bs = 0;
            while bs < text.len() {
                let be = (bs + BLOCK).min(text.len());
                let lo = bs.saturating_sub(MARGIN);
                let hi = (be + MARGIN).min(text.len());
                let orig = &text[lo..hi];
                // Each searcher reports its own hits in order; together they are sorted here,
                // so that the caller can build its windows in one pass (work per hit bounded,
                // not a rescan of the line per hit).
                hits.clear();
                if !self.fast_block(&scratch, orig, lo, bs - lo, be - lo, &mut hits, names) {
                    // Teddy, also for a block Vectorscan failed on (fail closed: its hits so
                    // far are dropped and the block searched again; the names are left to
                    // the caller).
                    hits.clear();
                    names.found = false;
                    let mut local =
                        |rule: usize, s: usize, e: usize| hits.push((s + lo, e + lo, rule));
                    f.clear();
                    f.extend_from_slice(orig);
                    f.make_ascii_lowercase();
                    self.folded.find(&f, orig, bs - lo, be - lo, &mut local);
                    self.exact.find(orig, orig, bs - lo, be - lo, &mut local);
                }
                hits.sort_unstable();
                hits.dedup();
                for &(s, e, rule) in hits.iter() {
                    hit(rule, s, e);
                }
                bs = be;
            }
            hits.clear();
            HITS.with(|h| *h.borrow_mut() = hits);
            self.give_back(scratch);
            if names.found {
                names.camel.sort_unstable();
                names.programs.sort_unstable();
            } else {
                names.camel.clear();
                names.programs.clear();
            }
        });
    }

    /// Vectorscan's scratch space for one call, when it is the engine.
    #[cfg(feature = "vectorscan")]
    fn scratch(&self, len: usize) -> Option<hyperscan::Scratch> {
        let (folded, exact) = (&self.folded, &self.exact);
        self.vectorscan
            .for_text(len, || vectorscan::Engine::new(folded, exact))?
            .scratch()
    }
    #[cfg(not(feature = "vectorscan"))]
    fn scratch(&self, _: usize) -> Option<()> {
        None
    }

    #[cfg(feature = "vectorscan")]
    fn give_back(&self, scratch: Option<hyperscan::Scratch>) {
        if let (Some(vs), Some(s)) = (self.vectorscan.get(), scratch) {
            vs.give_back(s);
        }
    }
    #[cfg(not(feature = "vectorscan"))]
    fn give_back(&self, _: Option<()>) {}

    /// One block by Vectorscan: hits `(start, end, rule)` offset by `lo` into `hits`; false
    /// when it is not the engine or failed (the caller then searches the block with Teddy).
    #[cfg(feature = "vectorscan")]
    #[allow(clippy::too_many_arguments)]
    fn fast_block(
        &self,
        scratch: &Option<hyperscan::Scratch>,
        orig: &[u8],
        lo: usize,
        from: usize,
        to: usize,
        hits: &mut Vec<(usize, usize, usize)>,
        names: &mut Names,
    ) -> bool {
        let (Some(vs), Some(scratch)) = (self.vectorscan.get(), scratch) else {
            return false;
        };
        let mut local = |rule: usize, s: usize, e: usize| hits.push((s + lo, e + lo, rule));
        let mut name = |n: vectorscan::Name, s: usize, e: usize| match n {
            vectorscan::Name::Camel => names.camel.push((s + lo, e + lo)),
            vectorscan::Name::Program => names.programs.push(s + lo),
        };
        let (spaces, block) = ((&self.folded, &self.exact), from..to);
        vs.find(scratch, spaces, orig, block, &mut local, &mut name)
            .is_ok()
    }
    #[cfg(not(feature = "vectorscan"))]
    #[allow(clippy::too_many_arguments)]
    fn fast_block(
        &self,
        _: &Option<()>,
        _: &[u8],
        _: usize,
        _: usize,
        _: usize,
        _: &mut Vec<(usize, usize, usize)>,
        _: &mut Names,
    ) -> bool {
        false
    }

    /// Anchor counts (folded, exact), for tests.
    pub fn anchor_counts(&self) -> (usize, usize) {
        (self.folded.anchors.len(), self.exact.anchors.len())
    }

    /// How many Teddy searchers (passes over the text) each space runs (folded, exact).
    #[cfg(test)]
    pub fn teddy_passes(&self) -> (usize, usize) {
        (self.folded.searchers.len(), self.exact.searchers.len())
    }

    /// The anchors each space's Teddy searchers look for (folded, exact), for tests.
    #[cfg(test)]
    pub fn teddy_anchors(&self) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let (f, e) = anchor_tables();
        let of = |space: &Space, table: &[Vec<u8>]| {
            space
                .searchers
                .iter()
                .flat_map(|(_, ids)| ids.iter().map(|&i| table[i].clone()))
                .collect()
        };
        (of(&self.folded, &f), of(&self.exact, &e))
    }
}

#[cfg(feature = "vectorscan")]
mod vectorscan {
    //! The Vectorscan engine: one literal database holding every anchor of both spaces (the
    //! folded space's `CASELESS`, so no lowercased copy is made) and their short keywords,
    //! scanned once per block, where Teddy makes five passes over a lowercased copy and ten
    //! `memmem` passes. Measured on 256 MiB of log lines in 32 KiB blocks: 0.07 s CPU
    //! against 0.18 s (README, issue 16). Run anchors (`AAAAAA`) stay on `memmem` with the
    //! run handling: Vectorscan would report one match per byte of a run.

    use super::Space;
    use hyperscan::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, OnceLock};

    /// The engine, built once `after` bytes have been searched (see
    /// [`super::VECTORSCAN_AFTER`]); `None` inside when it cannot be built here.
    pub struct Lazy {
        engine: OnceLock<Option<Engine>>,
        searched: AtomicUsize,
        after: usize,
    }

    impl Lazy {
        pub fn after(after: usize) -> Lazy {
            Lazy {
                engine: OnceLock::new(),
                searched: AtomicUsize::new(0),
                after,
            }
        }

        /// The engine, if built.
        pub fn get(&self) -> Option<&Engine> {
            self.engine.get()?.as_ref()
        }

        /// The engine for a search of `len` more bytes: built (by `build`) once the bytes
        /// searched reach the threshold.
        pub fn for_text(
            &self,
            len: usize,
            build: impl FnOnce() -> Option<Engine>,
        ) -> Option<&Engine> {
            if let Some(e) = self.engine.get() {
                return e.as_ref();
            }
            let before = self.searched.fetch_add(len, Ordering::Relaxed);
            if before.saturating_add(len) < self.after {
                return None;
            }
            self.engine.get_or_init(build).as_ref()
        }
    }

    /// What a pattern of the database is, and its length.
    #[derive(Clone, Copy)]
    struct Target {
        what: What,
        len: usize,
    }

    #[derive(Clone, Copy)]
    enum What {
        /// An anchor of a space (exact or folded), or one of its short (`memmem`) ones.
        Anchor {
            exact: bool,
            short: bool,
            index: usize,
        },
        Name(Name),
    }

    /// The other names (see [`super::Names`]).
    #[derive(Clone, Copy)]
    pub enum Name {
        Camel,
        Program,
    }

    pub struct Engine {
        db: BlockDatabase,
        targets: Vec<Target>,
        /// Run anchors of the exact space: (anchor index, byte, finder).
        runs: Vec<(usize, u8, memchr::memmem::Finder<'static>)>,
        /// Scratch space (one per concurrent scan), reused across calls.
        pool: Mutex<Vec<Scratch>>,
    }

    /// `\xNN` for every byte but letters and digits: the anchors as Vectorscan patterns.
    fn literal(a: &[u8]) -> String {
        a.iter()
            .map(|&b| {
                if b.is_ascii_alphanumeric() {
                    char::from(b).to_string()
                } else {
                    format!("\\x{b:02x}")
                }
            })
            .collect()
    }

    /// The hardware Debian's Vectorscan is built for (SSE4.2, checked by its package) and
    /// that the library accepts.
    fn usable() -> bool {
        #[cfg(target_arch = "x86_64")]
        if !std::arch::is_x86_feature_detected!("sse4.2") {
            return false;
        }
        hyperscan::Platform::is_valid().is_ok()
    }

    impl Engine {
        /// The database over both spaces' anchors, or `None` (Teddy then) when the hardware
        /// or the library refuses, or when a folded space holds a run anchor (its run handling
        /// needs a case-blind search this engine does not do).
        pub fn new(folded: &Space, exact: &Space) -> Option<Engine> {
            if !usable() || folded.run_anchor.iter().any(Option::is_some) {
                return None;
            }
            let mut patterns = Vec::new();
            let mut targets = Vec::new();
            let mut runs = Vec::new();
            for space in [folded, exact] {
                let flags = if space.folded {
                    CompileFlags::CASELESS
                } else {
                    CompileFlags::empty()
                };
                let lists = [(false, &space.texts[0]), (true, &space.texts[1])];
                for (short, list) in lists {
                    for (index, a) in list.iter().enumerate() {
                        if !short && let Some(b) = space.run_anchor[index] {
                            runs.push((index, b, memchr::memmem::Finder::new(a).into_owned()));
                            continue;
                        }
                        let mut p = Pattern::with_flags(literal(a), flags).ok()?;
                        p.id = Some(targets.len());
                        patterns.push(p);
                        let exact = !space.folded;
                        targets.push(Target {
                            what: What::Anchor {
                                exact,
                                short,
                                index,
                            },
                            len: a.len(),
                        });
                    }
                }
            }
            let camel = super::super::rules::CAMEL_SECRET_NAMES;
            let programs = super::super::scan::program_trigger_names();
            let named = camel
                .iter()
                .map(|n| (Name::Camel, n))
                .chain(programs.iter().map(|n| (Name::Program, n)));
            for (name, n) in named {
                let mut p =
                    Pattern::with_flags(literal(n.as_bytes()), CompileFlags::empty()).ok()?;
                p.id = Some(targets.len());
                patterns.push(p);
                targets.push(Target {
                    what: What::Name(name),
                    len: n.len(),
                });
            }
            let db: BlockDatabase = Patterns(patterns).build().ok()?;
            let first = db.alloc_scratch().ok()?;
            Some(Engine {
                db,
                targets,
                runs,
                pool: Mutex::new(vec![first]),
            })
        }

        /// A scratch space for one call's scans (from the pool, or a new one).
        pub fn scratch(&self) -> Option<Scratch> {
            let pooled = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
            pooled.or_else(|| self.db.alloc_scratch().ok())
        }

        pub fn give_back(&self, s: Scratch) {
            self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        }

        /// Reports every keyword occurrence whose anchor starts in `from..to` of `orig`.
        /// Also reports the other names' occurrences (start in `block`) to `name`.
        pub fn find(
            &self,
            scratch: &Scratch,
            (folded, exact): (&Space, &Space),
            orig: &[u8],
            block: std::ops::Range<usize>,
            hit: &mut dyn FnMut(usize, usize, usize),
            name: &mut dyn FnMut(Name, usize, usize),
        ) -> Result<(), hyperscan::Error> {
            let (from, to) = (block.start, block.end);
            self.db.scan(orig, scratch, |id, _, end, _| {
                let t = self.targets[id as usize];
                let end = end as usize;
                let at = end - t.len.min(end);
                if !(from..to).contains(&at) {
                    return Matching::Continue;
                }
                match t.what {
                    What::Anchor {
                        exact: ex,
                        short,
                        index,
                    } => {
                        let space = if ex { exact } else { folded };
                        let list = if short {
                            &space.short_anchors[index]
                        } else {
                            &space.anchors[index]
                        };
                        space.check(list, at, orig, hit);
                    }
                    What::Name(n) => name(n, at, end),
                }
                Matching::Continue
            })?;
            for (ai, b, finder) in &self.runs {
                let mut pos = from;
                while pos < to {
                    let Some(i) = finder.find(&orig[pos..]) else {
                        break;
                    };
                    let at = pos + i;
                    if at >= to {
                        break;
                    }
                    pos = exact.run_hit(*ai, *b, at, orig, hit);
                }
            }
            Ok(())
        }
    }
}

/// The anchor tables in use (folded, exact).
#[cfg(test)]
pub fn anchor_tables() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let v = |t: &[&str]| t.iter().map(|a| a.as_bytes().to_vec()).collect();
    (v(ANCHORS_FOLDED), v(ANCHORS_EXACT))
}

/// Anchors of the folded space: generated by [`computed_anchors`] (the test
/// `anchor_tables_are_current` prints the new table when the rules change).
const ANCHORS_FOLDED: &[&str] = &[
    "-begin", "-key", "-us", ".acc", ".com", "432:", "4b1d", ":*:", "://", ":5433:", "_key",
    "_mmk", "_v1_", "actory", "adafru", "adobe", "algoli", "alibab", "api", "asana", "atadog",
    "atlas", "auth", "aws", "beamer", "bintra", "bird", "book", "bucket", "cient:", "cio",
    "clojar", "cloud", "cohere", "coin", "conflu", "cont", "cookie", "curl", "d key=", "darkly",
    "discor", "dnkey-", "dp.pt.", "dronec", "endesk", "ession", "etlify", "etsy", "expone", "eyj",
    "fastly", "fin", "fio-u-", "flickr", "fm1", "fm2", "fo1_", "ftlaye", "gho_", "ghp_", "ghr_",
    "ghs_", "ghu_", "glagen", "glc", "gldt-", "glf", "glimt-", "gloas-", "glp", "glrt-", "gls",
    "gocard", "ha256~", "heroku", "hf_", "hippo_", "hrku-", "hubspo", "hvb.", "hvs.", "ibm",
    "ico-", "irtabl", "ittrex", "jfrog", "jira", "k-ant-", "k_live", "k_prod", "k_test", "kraken",
    "kubead", "linear", "linked", "lob", "looker", "m_aat_", "m_sat_", "machin", "mailgu",
    "meraki", "npm_", "ntn_", "ntry", "odecov", "okta", "p8e-", "pass", "pat.", "pat_", "pbox",
    "plaid", "plx-", "pnu_", "prime", "priv", "pul-", "pwd", "q0atp-", "q0csp-", "quares", "rdme_",
    "relic", "s-s4t2", "sat.", "scale_", "secret", "sgp_", "shp", "sl.", "snyk", "sonar", "sqa_",
    "sqp_", "squ_", "stem:b", "sumo", "t0c01.", "telegr", "tercom", "tfp_", "times", "token",
    "travis", "tter", "twitch", "ubygem", "uffel_", "untkey", "v1.0-", "whsec_", "xapp-", "xkeysi",
    "xox", "xray", "ya29.", "yandex",
];
/// Anchors of the exact space (see [`ANCHORS_FOLDED`]).
const ANCHORS_EXACT: &[&str] = &[
    "134894", "3BlbkF", ":AA", "A3-", "A3T", "AAAAAA", "ABIA", "ACCA", "AIza", "AKC", "AKIA",
    "AP0", "AP1", "AP2", "AP3", "AP4", "AP5", "AP6", "AP7", "AP8", "AP9", "APA", "APB", "APC",
    "APD", "APE", "APF", "API-", "ASIA", "ATATT3", "BSKQmV", "EAAA", "EAAC", "EAAM", "ET-KEY",
    "EZAK", "EZTK", "GOCSPX", "Ijoi", "K_TEST", "LS1CRU", "LTAI", "NRAK-", "NRJS-", "PMAK-", "SG.",
    "TELEGR", "Telegr", "ZXlK", "cmVmd", "pi-AgE", "ps_eyJ", "sk.eyJ", "uthTok",
];

#[cfg(test)]
#[path = "prefilter_tests.rs"]
mod tests;
