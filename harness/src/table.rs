//! One table writer for the suite's reports (`swap-bench`'s and `swap-check`'s): a header and
//! rows of cells, written as Markdown or as plain aligned text.

/// A table: its header and rows of cells (a row shorter than the header leaves the rest
/// empty; its last cell then runs on, unaligned, as a note).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// As Markdown: `| a | b |` rows under a `|---|---|` rule.
    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut out = line(&self.header);
        out.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }

    /// As plain text: the first column left-aligned, the others right-aligned, each as wide
    /// as its widest full-row cell.
    pub fn plain(&self) -> String {
        let full = |row: &&Vec<String>| row.len() == self.header.len();
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                std::iter::once(&self.header)
                    .chain(self.rows.iter().filter(full))
                    .map(|row| row[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let mut text = String::new();
            for (c, cell) in cells.iter().enumerate() {
                let last_of_short = c + 1 == cells.len() && cells.len() < self.header.len();
                match c {
                    _ if last_of_short => text.push_str(cell),
                    0 => text.push_str(&format!("{cell:<w$}", w = widths[c])),
                    _ => text.push_str(&format!("{cell:>w$}", w = widths[c])),
                }
                if c + 1 < cells.len() {
                    text.push(' ');
                }
            }
            format!("{}\n", text.trim_end())
        };
        let mut out = line(&self.header);
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    fn table() -> Table {
        let mut t = Table::new(&["config", "ms", "peak"]);
        t.row(vec!["unwrapped".into(), "1.50".into(), "1024".into()]);
        t.row(vec!["planned".into(), "12.25".into(), "512".into()]);
        t.row(vec!["reactive".into(), "did not run: no room".into()]);
        t
    }

    #[test]
    fn markdown_has_a_rule_under_the_header_and_a_line_per_row() {
        assert_eq!(
            table().markdown(),
            "| config | ms | peak |\n|---|---|---|\n| unwrapped | 1.50 | 1024 |\n\
             | planned | 12.25 | 512 |\n| reactive | did not run: no room |\n"
        );
    }

    #[test]
    fn plain_text_aligns_full_rows_and_lets_a_short_rows_note_run_on() {
        assert_eq!(
            table().plain(),
            "config       ms peak\nunwrapped  1.50 1024\nplanned   12.25  512\n\
             reactive  did not run: no room\n"
        );
    }
}
