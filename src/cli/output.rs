//! The one printer of every command: `-o` formats (text, table, wide, json, yaml, name,
//! jsonpath=TEMPLATE) and aligned tables. A command turns its result into a serialisable value and says how it reads to a human;
//! this module does the rest, the same way for all of them.

use super::jsonpath::Template;
use clap::builder::{PossibleValue, TypedValueParser};
use serde::Serialize;

/// An `-o` value. Each command accepts the subset it names in [`formats`].
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    Text,
    Table,
    Wide,
    Json,
    Yaml,
    /// `kind.group/NAME`, one per line (as `kubectl get -o name`).
    Name,
    /// `jsonpath=TEMPLATE`, kubectl's template syntax over the JSON output.
    JsonPath(Template),
    /// GitHub Actions workflow commands (`::error file=…,line=…,col=…::…`): annotations in a PR.
    Github,
}

impl Format {
    fn parse(s: &str) -> Option<Format> {
        if let Some(t) = s.strip_prefix("jsonpath=") {
            return Template::parse(t).ok().map(Format::JsonPath);
        }
        Some(match s {
            "text" => Format::Text,
            "table" => Format::Table,
            "wide" => Format::Wide,
            "json" => Format::Json,
            "yaml" => Format::Yaml,
            "name" => Format::Name,
            "github" => Format::Github,
            _ => return None,
        })
    }

    fn key(&self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Table => "table",
            Format::Wide => "wide",
            Format::Json => "json",
            Format::Yaml => "yaml",
            Format::Name => "name",
            Format::JsonPath(_) => "jsonpath",
            Format::Github => "github",
        }
    }
}

/// The `-o` parser of a command that accepts these formats (help and completion list them).
pub fn formats(accepted: &'static [&'static str]) -> FormatParser {
    FormatParser(accepted)
}

#[derive(Clone)]
pub struct FormatParser(&'static [&'static str]);

impl TypedValueParser for FormatParser {
    type Value = Format;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Format, clap::Error> {
        let text = value.to_string_lossy();
        if let Some(t) = text.strip_prefix("jsonpath=")
            && self.0.contains(&"jsonpath")
            && let Err(e) = Template::parse(t)
        {
            let mut err = clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("invalid value '{text}' for '--output': {e}\n"),
            );
            err = err.with_cmd(cmd);
            return Err(err);
        }
        match Format::parse(&text) {
            Some(f) if self.0.contains(&f.key()) => Ok(f),
            _ => {
                let mut err = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
                use clap::error::{ContextKind, ContextValue};
                if let Some(arg) = arg {
                    err.insert(
                        ContextKind::InvalidArg,
                        ContextValue::String(arg.to_string()),
                    );
                }
                err.insert(
                    ContextKind::InvalidValue,
                    ContextValue::String(text.into_owned()),
                );
                err.insert(
                    ContextKind::ValidValue,
                    ContextValue::Strings(self.0.iter().map(|s| shown(s).to_string()).collect()),
                );
                Err(err)
            }
        }
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            self.0.iter().map(|s| PossibleValue::new(shown(s))),
        ))
    }
}

fn shown(format: &'static str) -> &'static str {
    if format == "jsonpath" {
        "jsonpath=TEMPLATE"
    } else {
        format
    }
}

/// Rows under a header, columns padded to the widest cell; the last column is not padded.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The lines, each column at least `widths[i]` wide, and `widths` widened to what these lines
    /// need: the tables `status -w` prints one after the other stay aligned.
    pub fn render_within(&self, no_headers: bool, widths: &mut Vec<usize>) -> String {
        let lines: Vec<&Vec<String>> = (!no_headers)
            .then_some(&self.header)
            .into_iter()
            .chain(&self.rows)
            .collect();
        let columns = lines.iter().map(|l| l.len()).max().unwrap_or(0);
        if widths.len() < columns {
            widths.resize(columns, 0);
        }
        for (i, width) in widths.iter_mut().enumerate() {
            let cells = lines.iter().filter_map(|l| l.get(i));
            *width = cells.map(|c| c.chars().count()).fold(*width, usize::max);
        }
        let mut out = String::new();
        for l in lines {
            let cells: Vec<String> = l
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i + 1 == l.len() {
                        c.clone()
                    } else {
                        format!("{c:<w$}", w = widths[i])
                    }
                })
                .collect();
            out.push_str(&cells.join("  "));
            out.push('\n');
        }
        out
    }
}

/// How a command's result reads to a human (`-o text`, `table`, `wide`).
pub enum Human {
    Text(String),
    Table(Table),
}

/// A command's result: serialised as is for json/yaml, rendered for humans.
pub trait Render: Serialize {
    /// `wide`: the `-o wide` columns are wanted.
    fn human(&self, wide: bool) -> Human;
    /// `-o name`: one `kind.group/NAME` per object.
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
    /// `-o github`: workflow command lines (only commands that accept `github` call it).
    fn github(&self) -> String {
        String::new()
    }
}

/// How to print: the `-o` format and `--no-headers`.
#[derive(Clone, Debug)]
pub struct Printer {
    pub format: Format,
    pub no_headers: bool,
}

impl Printer {
    pub fn new(format: Format) -> Printer {
        Printer {
            format,
            no_headers: false,
        }
    }

    /// Prints `value`. A table without rows is kubectl's empty selection: nothing on stdout, and
    /// `No resources found` on stderr (json and yaml print the empty list, as kubectl does).
    pub fn print(&self, value: &impl Render) -> anyhow::Result<()> {
        if matches!(self.format, Format::Table | Format::Wide)
            && let Human::Table(t) = value.human(self.format == Format::Wide)
            && t.rows.is_empty()
        {
            super::streams::err("No resources found");
            return Ok(());
        }
        super::streams::out(&self.render(value)?)
    }

    pub fn render(&self, value: &impl Render) -> anyhow::Result<String> {
        self.render_within(value, &mut Vec::new())
    }

    /// As [`Printer::render`], a table's columns kept at least `widths` wide (see
    /// [`Table::render_within`]).
    pub fn render_within(
        &self,
        value: &impl Render,
        widths: &mut Vec<usize>,
    ) -> anyhow::Result<String> {
        Ok(match &self.format {
            Format::Json => format!("{}\n", serde_json::to_string_pretty(value)?),
            Format::Yaml => serde_saphyr::to_string(value)?,
            Format::Name => value.names().iter().map(|n| format!("{n}\n")).collect(),
            Format::Github => value.github(),
            // As kubectl: no newline added after the template's own text.
            Format::JsonPath(t) => t
                .render(&serde_json::to_value(value)?)
                .map_err(|e| anyhow::anyhow!("-o jsonpath={}: {e}", t.source()))?,
            Format::Text | Format::Table | Format::Wide => {
                match value.human(self.format == Format::Wide) {
                    Human::Text(t) => t,
                    Human::Table(t) => t.render_within(self.no_headers, widths),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_all_but_the_last_column() {
        let mut t = Table::new(&["NAME", "PHASE", "MESSAGE"]);
        t.push(vec!["a".into(), "Complete".into(), "done".into()]);
        t.push(vec!["longer".into(), "X".into(), "m".into()]);
        assert_eq!(
            t.render_within(false, &mut Vec::new()),
            "NAME    PHASE     MESSAGE\na       Complete  done\nlonger  X         m\n"
        );
        assert_eq!(
            t.render_within(true, &mut Vec::new()),
            "a       Complete  done\nlonger  X         m\n"
        );
        // Widths carried from an earlier table (status -w) keep the columns where they were.
        let mut widths = vec![10];
        assert_eq!(
            t.render_within(true, &mut widths),
            "a           Complete  done\nlonger      X         m\n"
        );
        assert_eq!(widths, [10, 8, 4]);
    }
}
