//! Field errors as the API server reports them (`k8s.io/apimachinery/pkg/util/validation/field`):
//! a type, a path, the bad value and a detail, rendered as `<path>: <Type>[: <value>][: <detail>]`,
//! and gathered into one 422 `Invalid` Status whose message joins the distinct errors as Go's
//! `utilerrors.Aggregate` does (one error alone, several as `[a, b]`) and whose `details.causes[]`
//! carry `reason`/`field`/`message` (see `errors.NewInvalid` in
//! `k8s.io/apimachinery/pkg/api/errors/errors.go`, kubernetes/kubernetes v1.33).

use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    Required,
    Invalid,
    TypeInvalid,
    NotSupported,
    Duplicate,
    Forbidden,
    TooLong,
    TooMany,
}

impl ErrorType {
    /// The cause `reason` (`metav1.CauseType`).
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
        }
    }

    fn text(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
        }
    }
}

/// How Go prints the bad value: `%q` for strings, `%v` for numbers and booleans, `%#v` for maps
/// and slices of an unstructured object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadValue {
    None,
    Json(Value),
    /// Already formatted (e.g. `0x0`).
    Raw(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: String,
    pub value: BadValue,
    pub detail: String,
}

impl FieldError {
    pub fn new(kind: ErrorType, field: &str, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.into(),
        }
    }
    pub fn required(field: &str, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::None, detail)
    }
    pub fn invalid(field: &str, value: &Value, detail: impl Into<String>) -> Self {
        Self::new(
            ErrorType::Invalid,
            field,
            BadValue::Json(value.clone()),
            detail,
        )
    }
    pub fn forbidden(field: &str, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::None, detail)
    }
    pub fn too_long(field: &str, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            ErrorType::TooLong,
            field,
            BadValue::None,
            format!("may not be more than {max} {unit}"),
        )
    }
    pub fn not_supported(field: &str, value: &Value, supported: &[String]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        Self::new(
            ErrorType::NotSupported,
            field,
            BadValue::Json(value.clone()),
            format!("supported values: {}", quoted.join(", ")),
        )
    }

    /// `ErrorBody()`: the message without the field.
    pub fn body(&self) -> String {
        let mut s = match (self.kind, &self.value) {
            (ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong, _)
            | (_, BadValue::None) => self.kind.text().to_string(),
            (_, BadValue::Raw(r)) => format!("{}: {r}", self.kind.text()),
            (_, BadValue::Json(v)) => format!("{}: {}", self.kind.text(), go_value(v)),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Go's `strconv.Quote`/`%q` for the strings we meet (JSON escaping is the same for printable text).
pub fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// A JSON value as `field.Error` prints it from an unstructured object.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "\"null\"".into(),
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => go_sharp(v),
    }
}

/// `%#v` of `map[string]interface {}` / `[]interface {}` values.
pub fn go_sharp(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => format!(
            "[]interface {{}}{{{}}}",
            items.iter().map(go_sharp).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => {
            // fmt prints maps with sorted keys.
            let mut entries: Vec<_> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            format!(
                "map[string]interface {{}}{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", go_quote(k), go_sharp(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }
}

/// `utilerrors.NewAggregate(errs).Error()` after `ToAggregate()`'s de-duplication by message.
pub fn aggregate(errs: &[FieldError]) -> String {
    let mut seen = std::collections::HashSet::new();
    let msgs: Vec<String> = errs
        .iter()
        .map(ToString::to_string)
        .filter(|m| seen.insert(m.clone()))
        .collect();
    match msgs.len() {
        1 => msgs[0].clone(),
        _ => format!("[{}]", msgs.join(", ")),
    }
}

/// Appends `.child` (or starts the path).
pub fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}
