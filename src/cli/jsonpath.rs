//! `-o jsonpath=TEMPLATE`, kubectl's template syntax: text with `{.path}` expressions,
//! `{range .items[*]}…{end}` and `{"literal\n"}`. The expressions themselves are RFC 9535 JSONPath,
//! evaluated by the jsonpath-rust crate (kubectl's `.a.b` is `$.a.b`). Several results print space
//! separated, strings raw, anything else as JSON; a missing field prints nothing (kubectl's default
//! `--allow-missing-template-keys`). Syntax modelled on kubernetes/client-go util/jsonpath.

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Text(String),
    Expr(String),
    Range(String, Vec<Node>),
}

/// A parsed template; parsing happens when the flag is read, so a bad one is a usage error.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    source: String,
    nodes: Vec<Node>,
}

impl Template {
    pub fn parse(source: &str) -> Result<Template, String> {
        let mut tokens = tokenize(source)?.into_iter();
        let nodes = nodes(&mut tokens, false)?;
        let template = Template {
            source: source.to_string(),
            nodes,
        };
        // Each expression must be valid JSONPath: try it on an empty object.
        template.render(&Value::Null)?;
        Ok(template)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn render(&self, value: &Value) -> Result<String, String> {
        let mut out = String::new();
        render(&self.nodes, value, &mut out)?;
        Ok(out)
    }
}

enum Token {
    Text(String),
    Expr(String),
}

fn tokenize(source: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '{' {
            text.push(c);
            continue;
        }
        if !text.is_empty() {
            out.push(Token::Text(std::mem::take(&mut text)));
        }
        // Up to the matching `}`, skipping quoted strings (filters, literals).
        let mut expr = String::new();
        let mut quote: Option<char> = None;
        let mut depth = 0;
        let mut closed = false;
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Some(q), '\\') => {
                    expr.push(c);
                    if let Some(n) = chars.next() {
                        expr.push(n);
                    }
                    let _ = q;
                    continue;
                }
                (Some(q), c) if c == q => quote = None,
                (None, '"' | '\'') => quote = Some(c),
                (None, '{') => depth += 1,
                (None, '}') if depth == 0 => {
                    closed = true;
                    break;
                }
                (None, '}') => depth -= 1,
                _ => {}
            }
            expr.push(c);
        }
        if !closed {
            return Err(format!("unclosed action in template {source:?}"));
        }
        out.push(Token::Expr(expr.trim().to_string()));
    }
    if !text.is_empty() {
        out.push(Token::Text(text));
    }
    Ok(out)
}

fn nodes(tokens: &mut impl Iterator<Item = Token>, in_range: bool) -> Result<Vec<Node>, String> {
    let mut out = Vec::new();
    while let Some(t) = tokens.next() {
        match t {
            Token::Text(t) => out.push(Node::Text(t)),
            Token::Expr(e) if e == "end" => {
                return if in_range {
                    Ok(out)
                } else {
                    Err("{end} without {range}".into())
                };
            }
            Token::Expr(e) if e.starts_with("range ") => {
                let path = e["range ".len()..].trim().to_string();
                out.push(Node::Range(path, nodes(tokens, true)?));
            }
            Token::Expr(e) if e.starts_with('"') && e.ends_with('"') && e.len() >= 2 => {
                out.push(Node::Text(unescape(&e[1..e.len() - 1])));
            }
            Token::Expr(e) => out.push(Node::Expr(e)),
        }
    }
    if in_range {
        Err("{range} without {end}".into())
    } else {
        Ok(out)
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

/// kubectl's `.a.b`, `[0]`, `@` and `$` forms as RFC 9535 queries.
fn query(expr: &str) -> String {
    let e = expr.trim();
    if e.is_empty() || e == "@" || e == "$" {
        "$".into()
    } else if let Some(rest) = e.strip_prefix('@') {
        format!("${rest}")
    } else if e.starts_with('$') {
        e.into()
    } else if e.starts_with('.') || e.starts_with('[') {
        format!("${e}")
    } else {
        format!("$.{e}")
    }
}

fn select<'a>(expr: &str, value: &'a Value) -> Result<Vec<&'a Value>, String> {
    let q = query(expr);
    jsonpath_rust::query::js_path_vals(&q, value).map_err(|e| format!("jsonpath {{{expr}}}: {e}"))
}

fn render(nodes: &[Node], value: &Value, out: &mut String) -> Result<(), String> {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Expr(e) => {
                let found = select(e, value)?;
                let texts: Vec<String> = found
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(e, body) => {
                // `range .items[*]` iterates the results; `range .items` (an array) its elements.
                let found = select(e, value)?;
                let items: Vec<&Value> = match found.as_slice() {
                    [Value::Array(items)] if !e.trim_end().ends_with(']') => items.iter().collect(),
                    _ => found,
                };
                for item in items {
                    render(body, item, out)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(t: &str, v: Value) -> String {
        Template::parse(t).unwrap().render(&v).unwrap()
    }

    #[test]
    fn kubectl_templates() {
        let list = json!({"kind": "List", "items": [
            {"name": "a", "phase": "Complete", "n": 1},
            {"name": "b", "phase": "Pending", "n": 2}
        ]});
        assert_eq!(run("{.items[*].name}", list.clone()), "a b");
        assert_eq!(
            run(
                r#"{range .items[*]}{.name}={.phase}{"\n"}{end}"#,
                list.clone()
            ),
            "a=Complete\nb=Pending\n"
        );
        assert_eq!(run("n: {.items[1].n}", list.clone()), "n: 2");
        assert_eq!(
            run("{.items[?(@.phase=='Pending')].name}", list.clone()),
            "b"
        );
        assert_eq!(run("{.missing}", list.clone()), "");
        assert_eq!(run("{range .items}{@.name},{end}", list.clone()), "a,b,");
        assert_eq!(
            run("{.items[0]}", json!({"items": [{"x": 1}]})),
            r#"{"x":1}"#
        );
        assert!(Template::parse("{.items[*].name").is_err());
        assert!(Template::parse("{range .items[*]}{.name}").is_err());
        assert!(Template::parse("{.items[?(@.x==]}").is_err());
    }
}
