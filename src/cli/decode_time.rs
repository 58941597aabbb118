//! Wall-clock times for `zkfle decode`: printed as ZooKeeper's logs print them, and parsed
//! from `--since`/`--until`.
//!
//! Written here rather than taken from a date crate: the conversions are the two civil-date
//! formulas (days ↔ year/month/day) and, for `--local`, the C library's own `localtime_r`,
//! which reads the same TZ setting the servers' JVMs do.

use crate::capture::Timestamp;

/// How far local time is ahead of UTC at `secs` since the epoch (the C library's view).
pub fn local_offset_secs(secs: i64) -> i64 {
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: `localtime_r` writes only into `tm`, which lives on this stack frame, and
    // reads `t`; both pointers are valid for the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if ok { tm.tm_gmtoff } else { 0 }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// `secs.nanos` since the epoch as `2026-11-29 17:29:56,291123`, the form (to the
/// millisecond) of ZooKeeper's log lines; `local` shifts it to the local time zone.
pub fn format_wall(secs: i64, nanos: u32, local: bool) -> String {
    let secs = if local {
        secs + local_offset_secs(secs)
    } else {
        secs
    };
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02},{:06}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        nanos / 1000
    )
}

/// `to - from` in seconds as `{:>+12.6}` prints a float (`   +0.102000`), from the exact
/// times, rounded to the microsecond (halves away from zero).
pub fn elapsed_text(out: &mut String, from: Timestamp, to: Timestamp) {
    use std::fmt::Write as _;
    let nanos = (i128::from(to.secs) - i128::from(from.secs)) * 1_000_000_000
        + (i128::from(to.nanos) - i128::from(from.nanos));
    let micros = (nanos.unsigned_abs() + 500) / 1000;
    let (secs, fraction) = (micros / 1_000_000, micros % 1_000_000);
    // Sign, seconds, point and six digits, right-aligned in twelve columns.
    let width = 8 + secs.checked_ilog10().unwrap_or(0) as usize + 1;
    out.extend(std::iter::repeat_n(' ', 12usize.saturating_sub(width)));
    let sign = if nanos < 0 { '-' } else { '+' };
    // Writing to a String cannot fail.
    let _ = write!(out, "{sign}{secs}.{fraction:06}");
}

/// Parses a `--since`/`--until` value: seconds since the epoch (`1764437396.291`), a date and
/// time (`2026-11-29 17:29:56,291`, `2026-11-29T17:29:56.291`, UTC unless `local`), or
/// `+SECONDS` after the capture's first record (returned as `Relative`).
pub fn parse_when(s: &str, local: bool) -> Result<When, String> {
    let s = s.trim();
    if let Some(rel) = s.strip_prefix('+') {
        return rel
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(When::Relative)
            .ok_or_else(|| format!("{s:?}: expected +SECONDS"));
    }
    if let Ok(v) = s.parse::<f64>()
        && v.is_finite()
    {
        return Ok(When::Absolute(v));
    }
    let bad = || {
        format!(
            "{s:?}: expected seconds since the epoch, \"YYYY-MM-DD HH:MM:SS[.fff]\" or +SECONDS"
        )
    };
    let (date, time) = s
        .split_once([' ', 'T'])
        .map_or((s, "00:00:00"), |(d, t)| (d, t));
    let mut dp = date.split('-');
    let y: i64 = dp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let m: u32 = dp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let d: u32 = dp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    if dp.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let time = time.trim_end_matches('Z').replace(',', ".");
    let mut tp = time.split(':');
    let hh: i64 = tp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let mm: i64 = tp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let ss: f64 = tp
        .next()
        .map_or(Some(0.0), |v| v.parse().ok())
        .ok_or_else(bad)?;
    if tp.next().is_some()
        || !(0..24).contains(&hh)
        || !(0..60).contains(&mm)
        || !(0.0..61.0).contains(&ss)
    {
        return Err(bad());
    }
    let mut secs = days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60;
    if local {
        secs -= local_offset_secs(secs);
    }
    Ok(When::Absolute(secs as f64 + ss))
}

/// A `--since`/`--until` bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum When {
    /// Seconds since the epoch.
    Absolute(f64),
    /// Seconds after the capture's first record.
    Relative(f64),
}

impl When {
    /// Seconds since the epoch, given the capture's first record's time.
    pub fn resolve(self, t0: f64) -> f64 {
        match self {
            When::Absolute(t) => t,
            When::Relative(r) => t0 + r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for z in (-800_000..800_000).step_by(37) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2026, 11, 29), 20_786);
    }

    #[test]
    fn formats_as_zookeeper_logs() {
        // A ZooKeeper log line's time: 2026-11-29 17:29:56,291 (UTC).
        let secs = days_from_civil(2026, 11, 29) * 86_400 + 17 * 3600 + 29 * 60 + 56;
        assert_eq!(
            format_wall(secs, 291_123_456, false),
            "2026-11-29 17:29:56,291123"
        );
    }

    #[test]
    fn elapsed_times_are_exact_to_the_microsecond() {
        let at = |secs, nanos| Timestamp { secs, nanos };
        let text = |from, to| {
            let mut out = String::new();
            elapsed_text(&mut out, from, to);
            out
        };
        // 1700000000.102 has no exact float: its difference as floats prints 0.101999.
        let start = at(1_700_000_000, 0);
        assert_eq!(text(start, at(1_700_000_000, 102_000_000)), "   +0.102000");
        assert_eq!(text(start, at(1_700_000_000, 999_999_000)), "   +0.999999");
        assert_eq!(text(at(1_700_000_001, 7_000), start), "   -1.000007");
        assert_eq!(text(start, start), "   +0.000000");
        assert_eq!(text(start, at(1_700_000_000, 1_499)), "   +0.000001");
        assert_eq!(text(start, at(1_700_000_000, 1_500)), "   +0.000002");
        assert_eq!(text(start, at(1_700_012_345, 0)), "+12345.000000");
        // Against the float's own text where the float is exact: times a second and k/64 of a
        // second apart.
        for k in 0..64u32 {
            let nanos = k * 15_625_000;
            assert_eq!(
                text(at(0, 0), at(1, nanos)),
                format!("{:>+12.6}", 1.0 + f64::from(nanos) * 1e-9)
            );
        }
    }

    #[test]
    fn parses_bounds() {
        let secs = (days_from_civil(2026, 11, 29) * 86_400 + 17 * 3600 + 29 * 60) as f64;
        assert_eq!(
            parse_when("2026-11-29 17:29:56,5", false),
            Ok(When::Absolute(secs + 56.5))
        );
        assert_eq!(
            parse_when("2026-11-29T17:29:56.5Z", false),
            Ok(When::Absolute(secs + 56.5))
        );
        assert_eq!(parse_when("+1.5", false), Ok(When::Relative(1.5)));
        assert_eq!(parse_when("12.25", false), Ok(When::Absolute(12.25)));
        assert!(parse_when("yesterday", false).is_err());
        assert!(parse_when("2026-13-01 00:00:00", false).is_err());
    }
}
