//! Time zone names as flags and environment variables give them. `TZ` in containers and Lambda is
//! often `:UTC`, `:/etc/localtime`, a zoneinfo path or a POSIX rule such as `UTC0`; none of those
//! may break a command, so they are read leniently where they come from the environment.

use chrono_tz::Tz;

/// An IANA zone name, also accepting the `:` prefix and zoneinfo paths that `TZ` allows
/// (`:Europe/Berlin`, `/usr/share/zoneinfo/Europe/Berlin`) and the plain UTC spellings.
pub fn parse(value: &str) -> Result<Tz, String> {
    let v = value.trim();
    let v = v.strip_prefix(':').unwrap_or(v);
    let v = match v.find("zoneinfo/") {
        Some(i) => &v[i + "zoneinfo/".len()..],
        None => v,
    };
    if v.is_empty() || matches!(v, "UTC0" | "GMT0" | "Z" | "/etc/localtime" | "localtime") {
        return Ok(Tz::UTC);
    }
    v.parse::<Tz>()
        .map_err(|_| format!("unknown time zone {value:?} (an IANA name such as Europe/Berlin)"))
}

/// The zone of the `TZ` environment variable, or UTC (with a warning) when it is set to something
/// that names no IANA zone (a POSIX rule such as `CET-1CEST,M3.5.0,M10.5.0/3`).
pub fn from_tz_env() -> Tz {
    match std::env::var("TZ") {
        Ok(v) if !v.trim().is_empty() => parse(&v).unwrap_or_else(|e| {
            tracing::warn!("TZ: {e}; promotion windows without CRON_TZ= use UTC");
            Tz::UTC
        }),
        _ => Tz::UTC,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tz_spellings() {
        assert_eq!(parse("Europe/Berlin"), Ok(Tz::Europe__Berlin));
        assert_eq!(parse(":Europe/Berlin"), Ok(Tz::Europe__Berlin));
        assert_eq!(parse("/usr/share/zoneinfo/Asia/Tokyo"), Ok(Tz::Asia__Tokyo));
        for utc in [":UTC", "UTC", "UTC0", "", ":/etc/localtime"] {
            assert_eq!(parse(utc), Ok(Tz::UTC), "{utc:?}");
        }
        assert!(parse("CET-1CEST,M3.5.0,M10.5.0/3").is_err());
        assert!(parse("Mars/Olympus").is_err());
    }
}
