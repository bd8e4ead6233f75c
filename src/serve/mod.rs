//! The long-lived front ends, over the core: the daemon (`gateway serve`: its socket, peers,
//! protocol and the client side of a call to it), the MCP server (`gateway mcp`) and the REPL
//! (`gateway repl`). Each lives for many calls; each call is one invocation of `broker`,
//! which runs it end to end.
//!
//! Dependency direction: `main → cli, serve → broker → leaves → sys, durable, model`. `cli`
//! starts these front ends (and hands the daemon and the REPL what only the CLI knows: its
//! dispatch, its config, its rendering); `serve` never imports `cli`, `broker` never imports
//! `serve`, no leaf (`workspace`, `policy`, `sandbox`, ...) imports a layer above it, and the
//! bottom (`sys`, `durable`) imports no leaf. `tests::the_arrows_point_down` holds it.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    reason = "a front end: what it prints and its own process's environment are its job"
)]

pub mod budget;
pub mod daemon;
mod life;
pub mod mcp;
mod mcp_life;
pub mod proto;
pub mod repl;

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Files that may break an arrow, each with its reason. One added here must say why, and a
    /// stale one (its file no longer names the module) fails the test.
    const EXCEPTIONS: &[(&str, &str, &str)] = &[
        (
            "src/workspace/snapshot.rs",
            "broker",
            "moved out of broker/ by issue 35's layout with its errors still the broker's \
             `BrokerError`; an error type of its own ends this exception",
        ),
        (
            "src/workspace/apply.rs",
            "broker",
            "applies a capture layer with the journal and backup store as snapshot.rs does, \
             and returns the same `BrokerError`; one error type for both ends both exceptions",
        ),
    ];

    /// Every `.rs` file under `src/<dir>` (or the file `src/<dir>`).
    fn sources(dir: &str) -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(p) = stack.pop() {
            if p.is_dir() {
                stack.extend(
                    std::fs::read_dir(&p)
                        .expect("read_dir")
                        .map(|e| e.expect("dir entry").path()),
                );
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
        assert!(!out.is_empty(), "no sources under src/{dir}");
        out
    }

    /// The lines of `text` that name one of `modules` by path from the crate's root: `crate::m`,
    /// `super::m` (from a module's own `mod.rs`), `crate::{.., m, ..}`.
    fn mentions(text: &str, modules: &[&str]) -> Vec<(usize, String)> {
        let names = modules.join("|");
        let re = regex::Regex::new(&format!(
            r"\b(crate|super)\s*::\s*(\{{[^}}]*\b)?({names})\b"
        ))
        .expect("regex");
        text.lines()
            .enumerate()
            .filter(|(_, l)| re.is_match(l))
            .map(|(i, l)| (i + 1, l.trim().to_string()))
            .collect()
    }

    #[test]
    fn the_arrows_point_down() {
        // (directory under src/, modules it must not name, why)
        let rules: &[(&str, &[&str], &str)] = &[
            (
                "broker",
                &["serve", "cli"],
                "broker is the core the front ends stand on",
            ),
            (
                "serve",
                &["cli"],
                "serve is a front end beside cli, not beneath it",
            ),
        ];
        let leaves = [
            "workspace",
            "policy",
            "secrets",
            "sandbox",
            "audit",
            "journal",
            "fsops",
            "sys",
            "durable.rs",
            "model.rs",
        ];
        let leaf_rule: &[&str] = &["broker", "serve", "cli"];
        let mut checks: Vec<(&str, &[&str], &str)> = rules.to_vec();
        checks.extend(
            leaves
                .iter()
                .map(|l| (*l, leaf_rule, "a leaf imports no layer above it")),
        );
        // The bottom (DESIGN.md: `→ sys, durable, model`) imports no leaf above it either.
        let above_the_bottom: &[&str] = &[
            "workspace",
            "policy",
            "secrets",
            "sandbox",
            "audit",
            "journal",
            "fsops",
        ];
        checks.push((
            "durable.rs",
            above_the_bottom,
            "durable is beneath every leaf",
        ));
        checks.push((
            "sys",
            &[
                "workspace",
                "policy",
                "secrets",
                "sandbox",
                "audit",
                "journal",
                "fsops",
                "durable",
                "shown",
            ],
            "sys imports nothing of the crate but model",
        ));
        let mut found = Vec::new();
        let mut excused = vec![false; EXCEPTIONS.len()];
        for (dir, banned, why) in checks {
            for f in sources(dir) {
                let text = std::fs::read_to_string(&f).expect("read");
                let rel = f
                    .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                    .unwrap_or(&f)
                    .display()
                    .to_string();
                // `super::` names the crate's root only from a top-level module's mod.rs.
                let text = if rel.matches('/').count() == 2 && rel.ends_with("/mod.rs") {
                    text
                } else {
                    text.replace("super::", "super_::")
                };
                for (line, l) in mentions(&text, banned) {
                    match EXCEPTIONS
                        .iter()
                        .position(|(file, _, _)| rel.ends_with(file))
                    {
                        Some(i) => excused[i] = true,
                        None => found.push(format!("{rel}:{line}: {l}  ({why})")),
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "an arrow runs back up (main → cli, serve → broker → leaves → sys, durable, model):\n{}",
            found.join("\n")
        );
        for (i, (file, module, _)) in EXCEPTIONS.iter().enumerate() {
            assert!(
                excused[i],
                "stale exception: {file} no longer names {module}"
            );
        }
    }

    #[test]
    fn the_check_sees_each_way_of_naming_a_module() {
        // Spelled with `KRATE` and `SUPER` so that this file does not name the modules itself.
        let bad = [
            "use KRATE::cli::exit;",
            "    KRATE::serve::daemon::call(&s, a)",
            "use KRATE::{broker, cli};",
            "use KRATE :: cli;",
            "    SUPER::cli::run()",
        ];
        for b in bad.map(|b| b.replace("KRATE", "crate").replace("SUPER", "super")) {
            assert_eq!(mentions(&b, &["serve", "cli"]).len(), 1, "{b}");
        }
        let good = [
            "use crate::broker::client;",
            "    super::client::current()",
            "use crate::{broker, model};",
            "let cli = 1;",
        ];
        for g in good {
            assert!(mentions(g, &["serve", "cli"]).is_empty(), "{g}");
        }
    }
}
