//! Lua health-check scripts, in a sandbox, with the environment scripts written for Sveltos expect.
//!
//! Sandbox: only the `table`, `string`, `math` and `utf8` libraries, `os.time`/`os.date`/`os.clock`;
//! no `io`, `debug`, `package`, `load`, `dofile`, `loadfile`, `collectgarbage` or `print`; `require`
//! serves only the built-in `json` and `strings` modules. Every evaluation gets a fresh interpreter,
//! an instruction budget and a memory limit, so a script that loops or allocates without end fails
//! its check, quickly, with a clear message.
//!
//! Environment: global `obj` (the resource, or nil) and `metrics` (query name to value);
//! `evaluate()` returns a table with `healthy` (bool) and `message`. For scripts written in the Argo
//! CD style, as in the Sveltos docs' cert-manager example, a table without `healthy` counts as
//! healthy when its `status` is `"Healthy"`. `getResource(apiVersion, kind, namespace, name)` reads an
//! object of the checked cluster; its arguments must be string literals (they are fetched before the
//! script runs, so that the sandbox never does I/O).

use base64::Engine;
use mlua::{
    Function, HookTriggers, Lua, LuaOptions, LuaSerdeExt, StdLib, Table, Value as LuaValue, VmState,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Instructions one evaluation may run (a typical check needs a few thousand).
pub const INSTRUCTION_BUDGET: u64 = 5_000_000;
/// Memory the interpreter may allocate (in a worker, everything else an evaluation allocates counts
/// against the same limit, see `limits.rs`).
pub const MEMORY_LIMIT: usize = super::limits::MEMORY_LIMIT;

/// The object a four-argument `getResource` call names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ResourceRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub healthy: bool,
    pub message: String,
}

/// The literal four-argument `getResource(...)` calls of a script.
pub fn resource_refs(script: &str) -> Vec<ResourceRef> {
    let mut out = Vec::new();
    let mut rest = script;
    while let Some(i) = rest.find("getResource(") {
        rest = &rest[i + "getResource(".len()..];
        let mut args = Vec::new();
        let mut s = rest.trim_start();
        while args.len() < 4 {
            let Some(quote) = s.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                break;
            };
            let Some(end) = s[1..].find(quote) else { break };
            args.push(s[1..1 + end].to_string());
            s = s[end + 2..].trim_start();
            match s.strip_prefix(',') {
                Some(after) => s = after.trim_start(),
                None => break,
            }
        }
        if args.len() == 4 && s.starts_with(')') {
            let [api_version, kind, namespace, name] =
                <[String; 4]>::try_from(args).unwrap_or_default();
            out.push(ResourceRef {
                api_version,
                kind,
                namespace,
                name,
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

fn to_lua(lua: &Lua, v: &Value) -> mlua::Result<LuaValue> {
    let opts = mlua::serde::SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false);
    lua.to_value_with(v, opts)
}

/// Helpers written in Rust allocate outside the interpreter's accounting: refuse results that could
/// not fit the evaluation's memory anyway, with a clear error rather than a stopped worker.
fn fits(what: &str, bytes: usize) -> mlua::Result<()> {
    if bytes > MEMORY_LIMIT / 2 {
        return Err(mlua::Error::runtime(format!(
            "{what}: a result of {bytes} bytes exceeds the memory limit of {} MiB",
            MEMORY_LIMIT / (1024 * 1024)
        )));
    }
    Ok(())
}

fn strings_module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "contains",
        lua.create_function(|_, (s, sub): (String, String)| Ok(s.contains(&sub)))?,
    )?;
    t.set(
        "hasPrefix",
        lua.create_function(|_, (s, p): (String, String)| Ok(s.starts_with(&p)))?,
    )?;
    t.set(
        "hasSuffix",
        lua.create_function(|_, (s, p): (String, String)| Ok(s.ends_with(&p)))?,
    )?;
    t.set(
        "toLower",
        lua.create_function(|_, s: String| Ok(s.to_lowercase()))?,
    )?;
    t.set(
        "toUpper",
        lua.create_function(|_, s: String| Ok(s.to_uppercase()))?,
    )?;
    t.set(
        "trimSpace",
        lua.create_function(|_, s: String| Ok(s.trim().to_string()))?,
    )?;
    // Go's strings.Trim(s, cutset); without a cutset, white space.
    t.set(
        "trim",
        lua.create_function(|_, (s, cutset): (String, Option<String>)| {
            Ok(match cutset {
                Some(c) => s.trim_matches(|ch| c.contains(ch)).to_string(),
                None => s.trim().to_string(),
            })
        })?,
    )?;
    t.set(
        "split",
        lua.create_function(|lua, (s, sep): (String, String)| {
            let count = if sep.is_empty() {
                s.chars().count()
            } else {
                s.matches(sep.as_str()).count() + 1
            };
            // Each part costs a Rust String and a Lua string on top of its bytes.
            fits(
                "strings.split",
                s.len().saturating_add(count.saturating_mul(96)),
            )?;
            let parts: Vec<String> = if sep.is_empty() {
                s.chars().map(String::from).collect()
            } else {
                s.split(&sep).map(String::from).collect()
            };
            lua.create_sequence_from(parts)
        })?,
    )?;
    t.set(
        "join",
        lua.create_function(|_, (parts, sep): (Vec<String>, String)| {
            let bytes = parts
                .iter()
                .map(String::len)
                .sum::<usize>()
                .saturating_add(sep.len().saturating_mul(parts.len()));
            fits("strings.join", bytes)?;
            Ok(parts.join(&sep))
        })?,
    )?;
    // Go's strings.Replace(s, old, new, n); n < 0 (the default) replaces all.
    t.set(
        "replace",
        lua.create_function(
            |_, (s, old, new, n): (String, String, String, Option<i64>)| {
                let found = if old.is_empty() {
                    s.chars().count() + 1
                } else {
                    s.matches(old.as_str()).count()
                };
                let replaced = match n.unwrap_or(-1) {
                    n if n < 0 => found,
                    n => found.min(usize::try_from(n).unwrap_or(usize::MAX)),
                };
                fits(
                    "strings.replace",
                    s.len().saturating_add(replaced.saturating_mul(new.len())),
                )?;
                Ok(match n.unwrap_or(-1) {
                    n if n < 0 => s.replace(&old, &new),
                    n => s.replacen(&old, &new, n as usize),
                })
            },
        )?,
    )?;
    Ok(t)
}

fn json_module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: LuaValue| {
            let json: Value = lua.from_value(v)?;
            let text = serde_json::to_string(&json).map_err(mlua::Error::external)?;
            fits("json.encode", text.len())?;
            Ok(text)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, s: String| {
            let json: Value = serde_json::from_str(&s).map_err(mlua::Error::external)?;
            to_lua(lua, &json)
        })?,
    )?;
    Ok(t)
}

/// One evaluation's instruction count and start (reset for each evaluation). Work inside C
/// functions is not seen by the hook: the worker's watchdog bounds that.
struct Budget {
    executed: AtomicU64,
    base: std::time::Instant,
    started_ns: AtomicU64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            executed: AtomicU64::new(0),
            base: std::time::Instant::now(),
            started_ns: AtomicU64::new(0),
        }
    }
}

impl Budget {
    fn reset(&self) {
        self.executed.store(0, Ordering::Relaxed);
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.started_ns.store(now, Ordering::Relaxed);
    }

    fn elapsed(&self) -> std::time::Duration {
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        std::time::Duration::from_nanos(now.saturating_sub(self.started_ns.load(Ordering::Relaxed)))
    }
}

/// The sandbox, and its budget (reset for each evaluation).
fn sandbox(resources: Arc<BTreeMap<ResourceRef, Value>>) -> mlua::Result<(Lua, Arc<Budget>)> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8 | StdLib::OS,
        LuaOptions::new(),
    )?;
    let g = lua.globals();
    let os: Table = g.get("os")?;
    let safe_os = lua.create_table()?;
    for f in ["time", "date", "clock"] {
        safe_os.set(f, os.get::<LuaValue>(f)?)?;
    }
    g.set("os", safe_os)?;
    for f in [
        "dofile",
        "loadfile",
        "load",
        "collectgarbage",
        "print",
        "require",
    ] {
        g.set(f, LuaValue::Nil)?;
    }
    let json = json_module(&lua)?;
    let strings = strings_module(&lua)?;
    let modules = lua.create_table()?;
    modules.set("json", json)?;
    modules.set("strings", strings)?;
    g.set(
        "require",
        lua.create_function(move |_, name: String| match name.as_str() {
            "json" | "strings" => modules.get::<Table>(name),
            other => Err(mlua::Error::runtime(format!("module {other:?} is not available in the health-check sandbox (json and strings are)"))),
        })?,
    )?;
    g.set(
        "base64Encode",
        lua.create_function(|_, s: mlua::LuaString| {
            Ok(base64::engine::general_purpose::STANDARD.encode(s.as_bytes()))
        })?,
    )?;
    g.set(
        "base64Decode",
        lua.create_function(|lua, s: String| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s.trim())
                .map_err(mlua::Error::external)?;
            lua.create_string(bytes)
        })?,
    )?;
    for (global, field) in [("getLabel", "labels"), ("getAnnotation", "annotations")] {
        g.set(
            global,
            lua.create_function(move |_, (obj, key): (Option<Table>, String)| {
                let Some(obj) = obj else { return Ok(None) };
                let Some(meta) = obj.get::<Option<Table>>("metadata")? else {
                    return Ok(None);
                };
                let Some(map) = meta.get::<Option<Table>>(field)? else {
                    return Ok(None);
                };
                map.get::<Option<String>>(key)
            })?,
        )?;
    }
    g.set(
        "getResource",
        lua.create_function(move |lua, args: mlua::MultiValue| {
            let args: Vec<LuaValue> = args.into_iter().collect();
            match args.as_slice() {
                // Sveltos' two-argument form: a key in a table of resources handed to the script.
                [LuaValue::Table(t), key] => t.get::<LuaValue>(key.clone()),
                [a, b, c, d] => {
                    let s = |v: &LuaValue| {
                        v.as_string()
                            .map(|s| s.to_string_lossy())
                            .unwrap_or_default()
                    };
                    let r = ResourceRef {
                        api_version: s(a),
                        kind: s(b),
                        namespace: s(c),
                        name: s(d),
                    };
                    match resources.get(&r) {
                        Some(obj) => to_lua(lua, obj),
                        None => Ok(LuaValue::Nil),
                    }
                }
                _ => Err(mlua::Error::runtime(
                    "getResource takes (resources, key) or (apiVersion, kind, namespace, name)",
                )),
            }
        })?,
    )?;
    // Finalizers run with hooks off (no budget) and when the interpreter is dropped: refuse
    // metatables that carry `__gc` when they are set, which is when Lua 5.4 registers them.
    lua.load(
        r#"local setmt, rawget, type, error = setmetatable, rawget, type, error
        setmetatable = function(t, mt)
          if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
            error("finalizers (__gc) are not allowed in health checks", 2)
          end
          return setmt(t, mt)
        end"#,
    )
    .set_name("sandbox")
    .exec()?;
    let budget = Arc::new(Budget::default());
    let counter = budget.clone();
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(1000),
        move |_, _| {
            if budget.executed.fetch_add(1000, Ordering::Relaxed) >= INSTRUCTION_BUDGET {
                return Err(mlua::Error::runtime(format!(
                    "instruction budget of {INSTRUCTION_BUDGET} exceeded"
                )));
            }
            if budget.elapsed() > super::limits::TIME_LIMIT {
                return Err(mlua::Error::runtime(format!(
                    "time limit of {} s exceeded",
                    super::limits::TIME_LIMIT.as_secs()
                )));
            }
            Ok(VmState::Continue)
        },
    )?;
    lua.set_memory_limit(MEMORY_LIMIT)?;
    Ok((lua, counter))
}

fn describe(e: &mlua::Error) -> String {
    match e {
        mlua::Error::MemoryError(_) => format!(
            "memory limit of {} MiB exceeded",
            MEMORY_LIMIT / (1024 * 1024)
        ),
        mlua::Error::CallbackError { cause, .. } => describe(cause),
        other => other
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

/// A script compiled once into one sandbox, then evaluated against each object a check fetched from
/// one cluster (building the sandbox is most of the cost of an evaluation). Every evaluation runs
/// the script in a fresh global environment that reads through to the sandbox's, with a fresh
/// instruction budget, so one evaluation's globals are not seen by the next.
pub struct Evaluator {
    lua: Lua,
    chunk: Function,
    globals: Table,
    metrics: Table,
    budget: Arc<Budget>,
}

impl Evaluator {
    /// `Err` is a script that does not compile (or a sandbox that could not be built).
    pub fn new(
        script: &str,
        metrics: &BTreeMap<String, f64>,
        resources: Arc<BTreeMap<ResourceRef, Value>>,
    ) -> Result<Self, String> {
        let build = || -> mlua::Result<Evaluator> {
            let (lua, budget) = sandbox(resources)?;
            let chunk = lua.load(script).set_name("health check").into_function()?;
            let m = lua.create_table()?;
            for (k, v) in metrics {
                m.set(k.as_str(), *v)?;
            }
            let globals = lua.globals();
            Ok(Evaluator {
                lua,
                chunk,
                globals,
                metrics: m,
                budget,
            })
        };
        build().map_err(|e| format!("script error: {}", describe(&e)))
    }

    /// Runs `evaluate()` with `obj`. `Err` is a script that could not be evaluated (runtime error,
    /// budget, bad result); `Ok` carries its verdict.
    pub fn evaluate(&self, obj: Option<&Value>) -> Result<Outcome, String> {
        self.budget.reset();
        match self.run(obj) {
            Ok(r) => r,
            Err(e) => Err(format!("script error: {}", describe(&e))),
        }
    }

    fn run(&self, obj: Option<&Value>) -> mlua::Result<Result<Outcome, String>> {
        let lua = &self.lua;
        let env = lua.create_table()?;
        let inherit = lua.create_table()?;
        inherit.set("__index", &self.globals)?;
        env.set_metatable(Some(inherit))?;
        let obj_value = match obj {
            Some(o) => to_lua(lua, o)?,
            None => LuaValue::Nil,
        };
        env.set("obj", obj_value.clone())?;
        env.set("metrics", &self.metrics)?;
        env.set("_G", &env)?;
        self.chunk.set_environment(env.clone())?;
        self.chunk.call::<()>(())?;
        let Some(f) = env.get::<Option<Function>>("evaluate")? else {
            return Ok(Err(
                "the script does not define a function evaluate()".into()
            ));
        };
        let result: LuaValue = f.call(obj_value)?;
        let LuaValue::Table(t) = result else {
            return Ok(Err(format!(
                "evaluate() returned a {}, not a table",
                result.type_name()
            )));
        };
        let healthy = match t.get::<LuaValue>("healthy")? {
            LuaValue::Boolean(b) => b,
            LuaValue::Nil => t
                .get::<Option<String>>("status")
                .ok()
                .flatten()
                .is_some_and(|s| s == "Healthy"),
            other => {
                return Ok(Err(format!(
                    "evaluate() returned healthy = {}, not a boolean",
                    other.type_name()
                )));
            }
        };
        let message = t
            .get::<Option<String>>("message")
            .ok()
            .flatten()
            .unwrap_or_default();
        Ok(Ok(Outcome { healthy, message }))
    }
}

/// Runs `evaluate()` of `script` with `obj` and `metrics` in a sandbox of its own.
pub fn evaluate(
    script: &str,
    obj: Option<&Value>,
    metrics: &BTreeMap<String, f64>,
    resources: Arc<BTreeMap<ResourceRef, Value>>,
) -> Result<Outcome, String> {
    Evaluator::new(script, metrics, resources)?.evaluate(obj)
}

#[cfg(test)]
#[path = "lua_tests.rs"]
mod tests;

/// Compiles a script without running it (lint).
pub fn syntax_check(script: &str) -> Result<(), String> {
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::new()).map_err(|e| e.to_string())?;
    lua.load(script)
        .set_name("health check")
        .into_function()
        .map(|_| ())
        .map_err(|e| describe(&e))
}
