//! Where each field of a YAML file is: `spec.stages[0].trigger` → line and column, per document,
//! from the granit-parser events (the parser serde-saphyr uses), so that `lint` can point at it.

use granit_parser::{Event, Parser, ScalarStyle};
use std::collections::BTreeMap;

/// Line (1-based) and column (1-based) of a field's key (of the item, in a sequence).
pub type Position = (usize, usize);

/// The fields of one document of a file; `""` is the document's root node.
#[derive(Debug, Default)]
pub struct DocSpans {
    pub fields: BTreeMap<String, Position>,
    /// Where the value of a field (or item) that is a scalar starts: a bad value is pointed at
    /// itself, an unknown field at its key.
    pub scalars: BTreeMap<String, Position>,
    /// Empty or a plain null (`~`, `null`): serde-saphyr's `from_multiple` skips such documents,
    /// so they do not count in the document numbers.
    pub null: bool,
}

impl DocSpans {
    /// The position of `path`, or of its nearest parent that has one.
    pub fn find(&self, path: &str) -> Option<Position> {
        let mut p = path.to_string();
        loop {
            if let Some(at) = self.fields.get(&p) {
                return Some(*at);
            }
            match p.rfind(['.', '[']) {
                Some(cut) => p.truncate(cut),
                None => return self.fields.get("").copied(),
            }
        }
    }
}

fn null_scalar(text: &str, style: ScalarStyle, tagged: bool) -> bool {
    style == ScalarStyle::Plain && !tagged && matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// The positions of every field, one map per document (in file order), null documents left out
/// as serde-saphyr leaves them out. A file that does not parse gives what was read before the error.
pub fn positions(text: &str) -> Vec<DocSpans> {
    let mut docs: Vec<DocSpans> = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            break;
        };
        let at = (span.start.line(), span.start.col() + 1);
        let node_start = matches!(
            event,
            Event::Scalar(..)
                | Event::Alias(..)
                | Event::MappingStart(..)
                | Event::SequenceStart(..)
        );
        if let Event::DocumentStart(..) = event {
            docs.push(DocSpans {
                null: true,
                ..DocSpans::default()
            });
            stack.clear();
            continue;
        }
        let Some(spans) = docs.last_mut() else {
            continue;
        };
        if stack.is_empty() && node_start {
            spans.null = match &event {
                Event::Scalar(text, style, _, tag) => null_scalar(text, *style, tag.is_some()),
                _ => false,
            };
        }
        let is_scalar = matches!(event, Event::Scalar(..) | Event::Alias(..));
        let doc = &mut spans.fields;
        // The path of this node, when it is a value (not a key).
        let mut value_path: Option<String> = None;
        if node_start {
            match stack.last_mut() {
                Some(Frame::Map { path, key }) => match key.take() {
                    None => {
                        // A key: only scalar keys name fields.
                        if let Event::Scalar(text, ..) = &event {
                            let field = join(path, text);
                            doc.entry(field).or_insert(at);
                            *key = Some(text.to_string());
                        } else {
                            *key = Some(String::new());
                        }
                    }
                    Some(k) => value_path = Some(join(path, &k)),
                },
                Some(Frame::Seq { path, next }) => {
                    let item = format!("{path}[{next}]");
                    *next += 1;
                    doc.entry(item.clone()).or_insert(at);
                    value_path = Some(item);
                }
                None => {
                    doc.entry(String::new()).or_insert(at);
                    value_path = Some(String::new());
                }
            }
        }
        if is_scalar && let Some(p) = &value_path {
            spans.scalars.entry(p.clone()).or_insert(at);
        }
        match event {
            Event::MappingStart(..) => stack.push(Frame::Map {
                path: value_path.unwrap_or_default(),
                key: None,
            }),
            Event::SequenceStart(..) => stack.push(Frame::Seq {
                path: value_path.unwrap_or_default(),
                next: 0,
            }),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            _ => {}
        }
    }
    docs.retain(|d| !d.null);
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_items_have_positions() {
        let text = "a: 1\n---\n---\n~\n---\nspec:\n  stages:\n  - name: dev\n    trigger:\n      auto: {delay: 5x}\n";
        let docs = positions(text);
        assert_eq!(docs.len(), 2, "{docs:?}");
        assert_eq!(docs[0].fields.get("a"), Some(&(1, 1)));
        let d = &docs[1].fields;
        assert_eq!(d.get("spec.stages"), Some(&(7, 3)));
        assert_eq!(d.get("spec.stages[0]"), Some(&(8, 5)));
        assert_eq!(d.get("spec.stages[0].trigger"), Some(&(9, 5)));
        assert_eq!(d.get("spec.stages[0].trigger.auto.delay"), Some(&(10, 14)));
        assert_eq!(
            docs[1].scalars.get("spec.stages[0].trigger.auto.delay"),
            Some(&(10, 21))
        );
        assert_eq!(docs[1].scalars.get("spec.stages[0].name"), Some(&(8, 11)));
        assert_eq!(docs[1].find("spec.stages[0].trigger.manual"), Some((9, 5)));
        // A path nowhere in the document points at the document.
        assert_eq!(docs[1].find("nothing"), Some((6, 1)));
    }
}
