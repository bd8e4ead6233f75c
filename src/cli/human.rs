//! Human output that reads well (issue 15): aligned columns for the list outputs and colour
//! for decisions on a terminal (red deny, yellow ask, green allow), never when stdout is not a
//! terminal or `NO_COLOR` is set (<https://no-color.org>), nor for `TERM=dumb`. Durations and
//! sizes are `model::units`'.

use super::Call;
use anstyle::{AnsiColor, Style};

/// Whether the caller's stdout gets colour: a terminal (a daemon client's, as it said), and
/// neither `NO_COLOR` (non-empty) nor `TERM=dumb` in the caller's environment.
pub(super) fn colour(cli: &Call) -> bool {
    let tty = match cli.cx.client() {
        Some(c) => c.tty.stdout,
        None => std::io::IsTerminal::is_terminal(&std::io::stdout()),
    };
    let env = |k: &str| cli.cx.env_var(k).filter(|v| !v.is_empty());
    tty && env("NO_COLOR").is_none() && env("TERM").is_none_or(|t| t != "dumb")
}

/// The style of a decision's word: red deny, yellow ask, green allow.
pub(super) fn effect_style(effect: &str) -> Option<Style> {
    let c = match effect {
        "deny" => AnsiColor::Red,
        "ask" => AnsiColor::Yellow,
        "allow" => AnsiColor::Green,
        _ => return None,
    };
    Some(Style::new().fg_color(Some(c.into())).bold())
}

/// `text` in `style` when `on`.
pub(super) fn paint(text: &str, style: Option<Style>, on: bool) -> String {
    match style {
        Some(s) if on => format!("{}{text}{}", s.render(), s.render_reset()),
        _ => text.to_string(),
    }
}

/// A cell: its text, and its style on a terminal.
pub(super) struct Cell {
    text: String,
    style: Option<Style>,
}

impl Cell {
    /// Plain text.
    pub(super) fn new(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            style: None,
        }
    }

    /// Text in `style` (on a terminal).
    pub(super) fn styled(text: impl Into<String>, style: Option<Style>) -> Cell {
        Cell {
            text: text.into(),
            style,
        }
    }
}

/// Rows whose columns line up: each padded to its widest cell, two spaces apart, the last
/// left unpadded (one line per row, grep-friendly: no borders, no header).
pub(super) struct Table {
    /// Columns aligned right (numbers).
    right: Vec<bool>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table whose column `i` is right-aligned when `right[i]`.
    pub(super) fn new(right: &[bool]) -> Table {
        Table {
            right: right.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub(super) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// The lines, coloured when `colour`.
    pub(super) fn lines(&self, colour: bool) -> Vec<String> {
        let width = |c: &Cell| c.text.chars().count();
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i).map(width))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        self.rows
            .iter()
            .map(|r| {
                let mut line = String::new();
                for (i, c) in r.iter().enumerate() {
                    if i > 0 {
                        line.push_str("  ");
                    }
                    let pad = " ".repeat(widths[i] - width(c));
                    let right = self.right.get(i).copied().unwrap_or(false);
                    if right {
                        line.push_str(&pad);
                    }
                    line.push_str(&paint(&c.text, c.style, colour));
                    if !right && i + 1 < r.len() {
                        line.push_str(&pad);
                    }
                }
                line
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_colour_is_only_asked_for() {
        let mut t = Table::new(&[true, false, false]);
        t.row(vec![
            Cell::new("7"),
            Cell::styled("deny", effect_style("deny")),
            Cell::new("rm -rf /"),
        ]);
        t.row(vec![
            Cell::new("12"),
            Cell::styled("allow", effect_style("allow")),
            Cell::new("ls"),
        ]);
        assert_eq!(t.lines(false), [" 7  deny   rm -rf /", "12  allow  ls"]);
        let c = t.lines(true);
        assert!(
            c[0].contains("\u{1b}[") && c[0].ends_with("  rm -rf /"),
            "{c:?}"
        );
        // Padding is outside the colour: the columns still line up.
        let plain = |s: &str| {
            regex::Regex::new("\u{1b}\\[[0-9;]*m")
                .expect("re")
                .replace_all(s, "")
                .into_owned()
        };
        assert_eq!(plain(&c[1]), "12  allow  ls");
    }
}
