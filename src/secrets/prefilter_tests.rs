//! Tests of the keyword prefilter: both engines report the same hits, the other names found
//! in the one pass, concurrent scans (a child module of `prefilter.rs`, kept in a file of its
//! own so that the engine reads in one screenful of files under 1,000 lines).

use super::*;

fn hits(p: &Prefilter, text: &[u8]) -> Vec<(usize, usize, usize)> {
    let mut v = Vec::new();
    p.find(text, &mut |r, s, e| v.push((r, s, e)));
    v
}

/// A text of `len` bytes: filler of the given alphabet with, every so often, a keyword of
/// some rule in the case its rule matches and (for case-blind rules) a random one, runs
/// of one byte, and keywords straddling the 32 KiB block edges.
fn mixed(seed: u64, len: usize, filler: &[u8]) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let programs = super::super::scan::program_trigger_names();
    let names = super::super::rules::CAMEL_SECRET_NAMES
        .iter()
        .chain(&programs);
    let keywords: Vec<(&[u8], bool)> = RULES
        .iter()
        .flat_map(|r| r.keywords.iter().map(|k| (k.as_bytes(), r.case_sensitive)))
        .chain(names.map(|n| (n.as_bytes(), true)))
        .collect();
    let mut t = Vec::with_capacity(len + 64);
    while t.len() < len {
        match next() % 8 {
            0 | 1 => {
                let (k, exact) = keywords[(next() % keywords.len() as u64) as usize];
                for &b in k {
                    let flip = !exact && next() % 2 == 0 && b.is_ascii_alphabetic();
                    t.push(if flip { b ^ 0x20 } else { b });
                }
            }
            2 => {
                let b = [b'A', b'/', b':', b'-', b'a', b'x'][(next() % 6) as usize];
                let n = (next() % 300) as usize;
                t.extend(std::iter::repeat_n(b, n));
            }
            3 if (t.len() / BLOCK + 1) * BLOCK - t.len() < 400 => {
                // A keyword across the next block edge.
                let (k, _) = keywords[(next() % keywords.len() as u64) as usize];
                let edge = (t.len() / BLOCK + 1) * BLOCK;
                let back = (next() % (k.len() as u64 + 1)) as usize;
                while t.len() + back < edge && t.len() < len {
                    t.push(filler[(next() % filler.len() as u64) as usize]);
                }
                t.extend_from_slice(k);
            }
            _ => {
                for _ in 0..(next() % 200) {
                    t.push(filler[(next() % filler.len() as u64) as usize]);
                }
            }
        }
    }
    t
}

/// Issue 16: the Vectorscan engine (one pass) reports exactly the keyword hits of the
/// Teddy engine it stands in for, in the same order, on texts dense with every rule's
/// keywords in every case, runs of one byte, and keywords across block edges; and both
/// agree with a direct comparison at every position.
#[test]
fn both_prefilter_engines_report_the_same_hits() {
    let fast = Prefilter::eager();
    let teddy = Prefilter::teddy();
    assert_eq!(teddy.engine(), Engine::Teddy);
    let fillers: [&[u8]; 3] = [
        b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=:\"'\n",
        b"aAkKeEyY_-. \n",
        b"\x00\xff\x80\t/\\@#",
    ];
    let mut total = 0;
    for seed in 0..24u64 {
        let text = mixed(
            seed,
            40_000 + (seed as usize % 5) * 9_000,
            fillers[seed as usize % 3],
        );
        let want = hits(&teddy, &text);
        assert_eq!(hits(&fast, &text), want, "seed {seed}");
        // Direct comparison (run hits are one per run, so compare the places found).
        let mut naive = Vec::new();
        super::super::scan::find_keywords_naive(&text, &mut |ri, i, _| naive.push((ri, i)));
        let covered =
            |&(ri, i): &(usize, usize)| want.iter().any(|&(r, s, e)| r == ri && s <= i && i < e);
        let missed: Vec<_> = naive.iter().filter(|h| !covered(h)).take(5).collect();
        assert!(missed.is_empty(), "seed {seed}: missed {missed:?}");
        total += want.len();
    }
    assert!(
        total > 5_000,
        "{total} hits: the texts do not exercise the engines"
    );
}

/// Issue 16: the names the scanner looked for in passes of its own (camelCase secret
/// names, the programs whose flags take a secret) are found in the Vectorscan pass, every
/// occurrence, across block edges; the Teddy engine leaves them to the scanner.
#[test]
fn the_one_pass_finds_every_other_name() {
    let programs = super::super::scan::program_trigger_names();
    let camel = super::super::rules::CAMEL_SECRET_NAMES;
    let all = |text: &[u8], list: &[&str]| {
        let mut v: Vec<(usize, usize)> = list
            .iter()
            .flat_map(|n| {
                memchr::memmem::find_iter(text, n.as_bytes()).map(move |i| (i, i + n.len()))
            })
            .collect();
        v.sort_unstable();
        v
    };
    let mut checked = 0;
    for seed in 100..112u64 {
        let text = mixed(seed, 70_000, b"abcdefXYZ \n=-_");
        let mut names = Names::default();
        Prefilter::teddy().find_with_names(&text, &mut |_, _, _| {}, &mut names);
        assert!(!names.found && names.camel.is_empty() && names.programs.is_empty());
        Prefilter::eager().find_with_names(&text, &mut |_, _, _| {}, &mut names);
        if Prefilter::eager().engine() == Engine::Teddy {
            assert!(!names.found);
            continue;
        }
        assert!(names.found);
        assert_eq!(names.camel, all(&text, camel), "seed {seed}");
        let starts: Vec<usize> = all(&text, &programs).iter().map(|x| x.0).collect();
        assert_eq!(names.programs, starts, "seed {seed}");
        checked += names.camel.len() + names.programs.len();
    }
    #[cfg(feature = "vectorscan")]
    assert!(
        checked > 100,
        "{checked} names: the texts do not exercise the pass"
    );
    let _ = checked;
}

/// With the `vectorscan` feature built in, Vectorscan is the engine in use (on hardware
/// it refuses the prefilter falls back to Teddy, which this test reports as a failure: the
/// speed the README promises would be missing).
#[cfg(feature = "vectorscan")]
#[test]
fn vectorscan_is_the_engine_when_built_in() {
    assert_eq!(Prefilter::eager().engine(), Engine::Vectorscan);
}

/// Many threads scanning at once each get a scratch space of their own and the hits of
/// one thread alone.
#[test]
fn concurrent_scans_find_what_one_finds() {
    let p = Prefilter::eager();
    let text = mixed(7, 100_000, b"abc xyz=\n");
    let want = hits(&p, &text);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5 {
                    assert_eq!(hits(&p, &text), want);
                }
            });
        }
    });
}

/// A one-shot `gateway exec` of a command with a page of output must not pay for compiling
/// Vectorscan's database (~3 ms a call): a prefilter searches its first
/// [`super::VECTORSCAN_AFTER`] bytes with Teddy and builds Vectorscan for what follows.
#[cfg(feature = "vectorscan")]
#[test]
fn vectorscan_is_built_only_past_the_first_mebibytes() {
    let p = Prefilter::new();
    let text = mixed(3, 64 << 10, b"abc xyz=\n");
    let want = hits(&Prefilter::teddy(), &text);
    let mut searched = 0;
    while searched + text.len() < super::VECTORSCAN_AFTER {
        assert_eq!(hits(&p, &text), want);
        searched += text.len();
        assert_eq!(p.engine(), Engine::Teddy, "built after {searched} bytes");
    }
    assert_eq!(hits(&p, &text), want);
    assert_eq!(p.engine(), Engine::Vectorscan);
    assert_eq!(hits(&p, &text), want);
}
