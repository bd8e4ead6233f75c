//! Glob languages: which names a shell glob can expand to, and whether that set meets the
//! names a policy pattern matches.
//!
//! A glob in command position (`/bin/r[m] -rf /`, `./r? x`) runs whichever file it expands
//! to, so a rule's program pattern applies to it exactly when the two languages intersect.
//! Deciding that on the patterns (not on the files present at decision time, which a script
//! can change before it runs the glob) is sound and precise: `[` is not a glob at all (POSIX
//! 2.13.1: a `[` without a matching `]` is an ordinary character), `/bin/r[m]` can only be
//! `/bin/rm`, `./r?` can be `rm` but never `mkfs.ext4`.
//!
//! Syntax: `*` (not across `/`), `?`, bracket expressions `[abc]`, `[a-z]`, `[!x]`/`[^x]`,
//! `[[:alpha:]]`, and `\x` for a literal `x` (the analyser writes quoted characters so). With
//! `braces` (policy patterns, globset syntax) `**` also crosses `/` and a `{a,b}` alternation
//! makes the pattern unsupported (callers over-approximate).

/// One element of a glob.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Lit(char),
    /// `?`: one character other than `/`.
    One,
    /// `*`: any run of characters other than `/`.
    Star,
    /// `**` in a policy pattern: any run of characters, `/` included.
    AnyStar,
    Class {
        neg: bool,
        items: Vec<Item>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Range(char, char),
    Named(String),
}

/// A parsed glob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobLang(Vec<Tok>);

impl GlobLang {
    /// Parses shell glob text (the analyser's `Arg::Glob`, or any word).
    pub fn shell(p: &str) -> GlobLang {
        GlobLang(tokens(p, false).unwrap_or_default())
    }

    /// Parses a policy pattern (globset syntax); `None` if it uses `{a,b}` alternation.
    pub fn pattern(p: &str) -> Option<GlobLang> {
        tokens(p, true).map(GlobLang)
    }

    /// Whether any element is a wildcard (otherwise the text is one literal name).
    pub fn has_wildcards(&self) -> bool {
        self.0.iter().any(|t| !matches!(t, Tok::Lit(_)))
    }

    /// The one name this glob can expand to (every element a literal or a one-character
    /// bracket like `[m]`), if there is exactly one.
    pub fn single_name(&self) -> Option<String> {
        self.0
            .iter()
            .map(|t| match t {
                Tok::Lit(c) => Some(*c),
                Tok::Class { neg: false, items } => match items.as_slice() {
                    [Item::Range(a, b)] if a == b => Some(*a),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    /// The part after the last literal `/` (what a program pattern without `/` is compared
    /// with: a shell glob never matches `/` with a wildcard).
    pub fn basename(&self) -> GlobLang {
        let start = self
            .0
            .iter()
            .rposition(|t| *t == Tok::Lit('/'))
            .map_or(0, |i| i + 1);
        GlobLang(self.0[start..].to_vec())
    }

    /// Does the glob match the name `s`?
    #[cfg(test)]
    pub fn matches(&self, s: &str) -> bool {
        let lit = GlobLang(s.chars().map(Tok::Lit).collect());
        self.intersects(&lit)
    }

    /// Is there a name both globs match?
    pub fn intersects(&self, other: &GlobLang) -> bool {
        let (a, b) = (&self.0, &other.0);
        let (n, m) = (a.len(), b.len());
        // dp[i][j]: the suffixes a[i..] and b[j..] have a common name.
        let w = m + 1;
        let mut dp = vec![false; (n + 1) * w];
        dp[n * w + m] = true;
        for i in (0..=n).rev() {
            for j in (0..=m).rev() {
                if i == n && j == m {
                    continue;
                }
                let at = |x: usize, y: usize| dp[x * w + y];
                let v = if i < n && is_star(&a[i]) {
                    at(i + 1, j) || (j < m && can_eat(&a[i], &b[j]) && at(i, j + 1))
                } else if j < m && is_star(&b[j]) {
                    at(i, j + 1) || (i < n && can_eat(&b[j], &a[i]) && at(i + 1, j))
                } else if i < n && j < m {
                    compatible(&a[i], &b[j]) && at(i + 1, j + 1)
                } else {
                    false
                };
                dp[i * w + j] = v;
            }
        }
        dp[0]
    }
}

fn is_star(t: &Tok) -> bool {
    matches!(t, Tok::Star | Tok::AnyStar)
}

/// Can the star `s` absorb what `t` matches (one character, or nothing for another star)?
fn can_eat(s: &Tok, t: &Tok) -> bool {
    match t {
        Tok::Star | Tok::AnyStar => true,
        _ if *s == Tok::AnyStar => true,
        _ => compatible(&Tok::One, t),
    }
}

fn tokens(p: &str, braces: bool) -> Option<Vec<Tok>> {
    let c: Vec<char> = p.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\\' if i + 1 < c.len() => {
                out.push(Tok::Lit(c[i + 1]));
                i += 2;
            }
            '*' if braces && c.get(i + 1) == Some(&'*') => {
                out.push(Tok::AnyStar);
                i += 2;
            }
            '*' => {
                if out.last() != Some(&Tok::Star) {
                    out.push(Tok::Star);
                }
                i += 1;
            }
            '?' => {
                out.push(Tok::One);
                i += 1;
            }
            '{' if braces => return None,
            '[' => match bracket(&c, i + 1) {
                Some((tok, next)) => {
                    out.push(tok);
                    i = next;
                }
                None => {
                    out.push(Tok::Lit('['));
                    i += 1;
                }
            },
            ch => {
                out.push(Tok::Lit(ch));
                i += 1;
            }
        }
    }
    Some(out)
}

/// A bracket expression starting after `[` at `j`: the token and the index after `]`, or
/// `None` when the `[` is an ordinary character (no closing `]`, or a `/` inside).
fn bracket(c: &[char], mut j: usize) -> Option<(Tok, usize)> {
    let neg = matches!(c.get(j), Some('!' | '^'));
    if neg {
        j += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    loop {
        let ch = *c.get(j)?;
        if ch == ']' && !first {
            return Some((Tok::Class { neg, items }, j + 1));
        }
        if ch == '/' {
            return None;
        }
        first = false;
        if ch == '[' && matches!(c.get(j + 1), Some(':' | '=' | '.')) {
            let kind = c[j + 1];
            let close =
                (j + 2..c.len().saturating_sub(1)).find(|&k| c[k] == kind && c[k + 1] == ']')?;
            let name: String = c[j + 2..close].iter().collect();
            items.push(if kind == ':' {
                Item::Named(name)
            } else {
                // `[=a=]` and `[.a.]`: the character itself (single-character forms).
                let ch = name.chars().next().unwrap_or('\0');
                Item::Range(ch, ch)
            });
            j = close + 2;
            continue;
        }
        let (lo, mut next) = if ch == '\\' && j + 1 < c.len() {
            (c[j + 1], j + 2)
        } else {
            (ch, j + 1)
        };
        let mut hi = lo;
        if c.get(next) == Some(&'-') && c.get(next + 1).is_some_and(|x| *x != ']') {
            let (h, n2) = if c[next + 1] == '\\' && next + 2 < c.len() {
                (c[next + 2], next + 3)
            } else {
                (c[next + 1], next + 2)
            };
            hi = h;
            next = n2;
        }
        items.push(Item::Range(lo, hi));
        j = next;
    }
}

fn named(name: &str, c: char) -> bool {
    match name {
        "alpha" => c.is_alphabetic(),
        "digit" => c.is_ascii_digit(),
        "alnum" => c.is_alphanumeric(),
        "upper" => c.is_uppercase(),
        "lower" => c.is_lowercase(),
        "space" => c.is_whitespace(),
        "blank" => c == ' ' || c == '\t',
        "punct" => c.is_ascii_punctuation(),
        "xdigit" => c.is_ascii_hexdigit(),
        "cntrl" => c.is_control(),
        "graph" => !c.is_whitespace() && !c.is_control(),
        "print" => !c.is_control(),
        // An unknown class name: assume it may match (over-approximates).
        _ => true,
    }
}

fn accepts(t: &Tok, c: char) -> bool {
    match t {
        Tok::Lit(l) => *l == c,
        Tok::One | Tok::Star => c != '/',
        Tok::AnyStar => true,
        Tok::Class { neg, items } => {
            c != '/'
                && *neg
                    != items.iter().any(|i| match i {
                        Item::Range(a, b) => (*a..=*b).contains(&c),
                        Item::Named(n) => named(n, c),
                    })
        }
    }
}

/// Candidate characters a single-character token may match (bounded; `None` = too many to
/// list, which callers treat as "may overlap").
fn candidates(t: &Tok) -> Option<Vec<char>> {
    match t {
        Tok::Lit(c) => Some(vec![*c]),
        Tok::Class { neg: false, items } => {
            let mut out = Vec::new();
            for i in items {
                match i {
                    Item::Range(a, b) => {
                        if (*b as u32).saturating_sub(*a as u32) > 4096 {
                            return None;
                        }
                        out.extend(*a..=*b);
                    }
                    Item::Named(_) => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// Do two single-character tokens share a character?
fn compatible(a: &Tok, b: &Tok) -> bool {
    if let Some(cs) = candidates(a) {
        return cs.into_iter().any(|c| accepts(a, c) && accepts(b, c));
    }
    if let Some(cs) = candidates(b) {
        return cs.into_iter().any(|c| accepts(a, c) && accepts(b, c));
    }
    // Both wide (`?`, negated or named classes): they share some character unless a sample
    // of likely ones says otherwise; ASCII and a few others cover every practical case.
    (' '..='~')
        .chain(['é', 'ß', 'λ', '中'])
        .any(|c| accepts(a, c) && accepts(b, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_follow_posix() {
        for lit in ["[", "[[", "]", "[]", "[!]", "a[b", "[a/b]", "]]"] {
            assert!(!GlobLang::shell(lit).has_wildcards(), "{lit}");
        }
        for g in ["[a]", "[]]", "[!a]", "[[:alpha:]]", "r?", "*", "a[b-d]"] {
            assert!(GlobLang::shell(g).has_wildcards(), "{g}");
        }
        assert!(!GlobLang::shell("\\*").has_wildcards());
        assert_eq!(
            GlobLang::shell("/bin/r[m]").single_name().as_deref(),
            Some("/bin/rm")
        );
        assert_eq!(GlobLang::shell("r?").single_name(), None);
    }

    #[test]
    fn intersections() {
        let pat = |p: &str| GlobLang::pattern(p).expect("pattern");
        let sh = GlobLang::shell;
        assert!(sh("r?").intersects(&pat("rm")));
        assert!(!sh("r?").intersects(&pat("mkfs*")));
        assert!(sh("mk*").intersects(&pat("mkfs*")));
        assert!(sh("*").intersects(&pat("sudo")));
        assert!(!sh("[!s]udo").intersects(&pat("sudo")));
        assert!(sh("[[:lower:]]udo").intersects(&pat("sudo")));
        assert!(!sh("[[:upper:]]udo").intersects(&pat("sudo")));
        assert!(!sh("/bin/*").intersects(&pat("/usr/bin/rm")));
        assert!(sh("/*/*/rm").intersects(&pat("/usr/bin/rm")));
        assert!(sh("/a/*").intersects(&pat("/a/**")));
        assert!(!sh("x*").intersects(&pat("y*")));
        assert!(sh("*x").intersects(&pat("y*")));
        assert!(GlobLang::pattern("{a,b}").is_none());
        assert!(sh("r[a-z]").matches("rm") && !sh("r[a-l]").matches("rm"));
    }
}
