//! `evaluateCEL` rules over the variable `resource`, OR-ed as upstream: the first rule that is true
//! makes the resource healthy. A rule that does not compile is reported as such (upstream skips it).
//!
//! JSON integers become CEL `int`: cel-interpreter's own JSON conversion makes non-negative integers
//! `uint`, and then `resource.spec.replicas == 3` would be false.

use super::limits::{CEL_MAX_LENGTH, CEL_MAX_NESTING};
use cel_interpreter::objects::{Key, Map};
use cel_interpreter::{Context, Program, Value as CelValue};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

pub fn to_cel(v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => CelValue::Int(i),
            None => n
                .as_u64()
                .map(CelValue::UInt)
                .unwrap_or_else(|| CelValue::Float(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<Key, CelValue> = m
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            CelValue::Map(Map { map: Arc::new(map) })
        }
    }
}

/// cel-interpreter's generated parser panics on some syntax errors (`a ==`); a user's typo must
/// fail its check, not the pass.
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    quiet_parser_panics();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// Such a panic is caught and reported as a compile error; keep the default hook from printing it.
/// Panics anywhere else are printed as usual.
fn quiet_parser_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let file = info.location().map(|l| l.file()).unwrap_or_default();
            if !(file.contains("antlr4rust")
                || file.contains("cel-parser")
                || file.contains("cel_parser"))
            {
                default(info);
            }
        }));
    });
}

/// The deepest nesting of brackets in a rule, outside string literals.
pub fn nesting(rule: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut chars = rule.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            (None, _) => {}
        }
    }
    deepest
}

/// Rules the parser could not survive (its recursion per nesting level overflows the stack) are
/// refused before parsing, with a clear message.
fn within_limits(name: &str, rule: &str) -> Result<(), String> {
    if rule.len() > CEL_MAX_LENGTH {
        return Err(format!(
            "CEL rule {name:?} is {} bytes long; at most {CEL_MAX_LENGTH} are accepted",
            rule.len()
        ));
    }
    let depth = nesting(rule);
    if depth > CEL_MAX_NESTING {
        return Err(format!(
            "CEL rule {name:?} nests brackets {depth} deep; at most {CEL_MAX_NESTING} levels are accepted"
        ));
    }
    Ok(())
}

/// Compiles every rule first, so that a typo is reported even when an earlier rule is true.
pub fn compile(rules: &[(String, String)]) -> Result<Vec<(String, Program)>, String> {
    for (name, rule) in rules {
        within_limits(name, rule)?;
    }
    rules
        .iter()
        .map(|(name, rule)| match guarded(|| Program::compile(rule)) {
            Some(Ok(p)) => Ok((name.clone(), p)),
            Some(Err(e)) => {
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                Err(format!("CEL rule {name:?} does not compile: {first}"))
            }
            None => Err(format!(
                "CEL rule {name:?} does not compile: {:?} is not a valid expression",
                super::limits::truncate(rule, 256)
            )),
        })
        .collect()
}

/// `Ok(Some(rule))`: healthy by that rule; `Ok(None)`: no rule is true.
pub fn evaluate(
    programs: &[(String, Program)],
    resource: &Value,
) -> Result<Option<String>, String> {
    let mut context = Context::default();
    context.add_variable_from_value("resource", to_cel(resource));
    for (name, program) in programs {
        // As upstream: a rule that fails to evaluate (a missing field) is skipped.
        if let Some(Ok(CelValue::Bool(true))) = guarded(|| program.execute(&context)) {
            return Ok(Some(name.clone()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(r: &[(&str, &str)]) -> Vec<(String, String)> {
        r.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn rules_are_ored_over_resource() {
        let deployment = json!({"spec": {"replicas": 3}, "status": {"availableReplicas": 3, "conditions": [{"type": "Available", "status": "True"}]}});
        let p = compile(&rules(&[
            (
                "replicas",
                "resource.status.availableReplicas == resource.spec.replicas",
            ),
            (
                "available",
                "resource.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')",
            ),
        ]))
        .unwrap();
        assert_eq!(
            evaluate(&p, &deployment).unwrap().as_deref(),
            Some("replicas")
        );
        let degraded = json!({"spec": {"replicas": 3}, "status": {"availableReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]}});
        assert_eq!(
            evaluate(&p, &degraded).unwrap().as_deref(),
            Some("available")
        );
        let down =
            json!({"spec": {"replicas": 3}, "status": {"availableReplicas": 0, "conditions": []}});
        assert_eq!(evaluate(&p, &down).unwrap(), None);
    }

    #[test]
    fn integers_compare_as_int() {
        let p = compile(&rules(&[(
            "eq",
            "resource.spec.replicas == 3 && resource.spec.replicas + 1 == 4",
        )]))
        .unwrap();
        assert!(
            evaluate(&p, &json!({"spec": {"replicas": 3}}))
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_missing_field_skips_the_rule_and_a_syntax_error_is_reported() {
        let p = compile(&rules(&[
            ("missing", "resource.status.ready == true"),
            ("fallback", "has(resource.spec)"),
        ]))
        .unwrap();
        assert_eq!(
            evaluate(&p, &json!({"spec": {}})).unwrap().as_deref(),
            Some("fallback")
        );
        let err = compile(&rules(&[
            ("ok", "true"),
            ("typo", "resource.status.ready =="),
        ]))
        .unwrap_err();
        assert!(
            err.starts_with("CEL rule \"typo\" does not compile"),
            "{err}"
        );
    }
}
