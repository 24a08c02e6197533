//! The one duration grammar of every command-line flag (`--tick`, `--until`, `--timeout`,
//! `--request-timeout`, the offsets of `simulate`'s scripts): humantime's units and, beside them,
//! Go's syntax of the manifests ([`super::duration`]), so that a value copied from a manifest works.

use chrono::Duration;

/// humantime's units (`90s`, `2m`, `1h30m`, `1d`, `2w`, `1h 30m`) and Go's (`1.5h`, `300ms`, as in
/// manifests), `0` for none.
pub fn parse(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    let std = match humantime::parse_duration(text) {
        Ok(d) => d,
        Err(_) => match super::GoDuration::parse(text) {
            Ok(g) if !g.as_str().starts_with('-') => g.to_std(),
            _ => {
                return Err(format!(
                    "invalid duration {s:?} (examples: 90s, 2m, 1h30m, 1.5h, 1d)"
                ));
            }
        },
    };
    Duration::from_std(std).map_err(|e| format!("duration {s:?} out of range: {e}"))
}
