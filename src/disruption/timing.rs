//! Time handling for disruption decisions: RFC 3339 timestamps as Kubernetes prints them, Go
//! durations as Karpenter accepts them (`720h`, `1h30m`, `Never`), and whether a cron-scheduled
//! disruption budget is active at a given instant. Everything takes `now` as an argument, so the
//! decisions stay pure and tests pin the clock.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use croner::parser::{CronParser, Seconds, Year};

/// An instant in UTC; Karpenter evaluates schedules and lifetimes in UTC only.
pub type Timestamp = DateTime<Utc>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    #[error("malformed duration {0:?}")]
    MalformedDuration(String),
    #[error("malformed timestamp {text:?}: {reason}")]
    MalformedTimestamp { text: String, reason: String },
    #[error("malformed cron schedule {text:?}: {reason}")]
    MalformedSchedule { text: String, reason: String },
    #[error("cannot evaluate cron schedule {text:?}: {reason}")]
    ScheduleEvaluation { text: String, reason: String },
    #[error("duration {0:?} is out of range")]
    DurationOutOfRange(Duration),
}

/// Parses an RFC 3339 timestamp (`2024-05-01T10:00:00Z`, with an offset or fractional seconds too).
pub fn parse_timestamp(s: &str) -> Result<Timestamp, TimingError> {
    DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| TimingError::MalformedTimestamp {
            text: s.to_string(),
            reason: e.to_string(),
        })
}

/// Parses a duration the way Go's `time.ParseDuration` does: one or more `<number><unit>` terms
/// (`30s`, `1h30m`, `1.5h`, `.5s`) with units ns, us, µs, ms, s, m, h, or the bare `0`. Negative
/// durations are rejected because nothing in Karpenter's disruption API may be negative; like Go,
/// the total may not exceed `i64::MAX` nanoseconds (about 292 years).
pub fn parse_go_duration(s: &str) -> Result<Duration, TimingError> {
    let malformed = || TimingError::MalformedDuration(s.to_string());
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(malformed());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, tail) = rest.split_at(int_len);
        rest = tail;
        let mut frac_digits = "";
        if let Some(tail) = rest.strip_prefix('.') {
            let frac_len = tail.bytes().take_while(u8::is_ascii_digit).count();
            (frac_digits, rest) = tail.split_at(frac_len);
        }
        // Go accepts "1.s" and ".5s" but not a term with no digits at all ("s", ".s", "-1s").
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(malformed());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (unit, tail) = rest.split_at(unit_len);
        rest = tail;
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(malformed()),
        };
        let whole = digits_value(int_digits).ok_or_else(malformed)?;
        // Fraction digits past the 18th are worth less than a nanosecond even in hours; Go drops
        // them too, and keeping them would only risk overflow.
        let frac = &frac_digits[..frac_digits.len().min(18)];
        let frac_ns = match digits_value(frac) {
            Some(value) if !frac.is_empty() => value * unit_ns / 10u128.pow(frac.len() as u32),
            _ => 0,
        };
        total = whole
            .checked_mul(unit_ns)
            .and_then(|ns| ns.checked_add(frac_ns))
            .and_then(|ns| ns.checked_add(total))
            .filter(|&ns| ns <= i64::MAX as u128)
            .ok_or_else(malformed)?;
    }
    u64::try_from(total)
        .map(Duration::from_nanos)
        .map_err(|_| malformed())
}

/// The value of a run of ASCII digits (0 when empty), `None` on overflow.
fn digits_value(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |acc, b| {
        acc.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })
}

/// Parses Karpenter's NillableDuration: `Never` is `None` (the feature is off), anything else a Go
/// duration.
pub fn parse_nillable(s: &str) -> Result<Option<Duration>, TimingError> {
    if s == "Never" {
        return Ok(None);
    }
    parse_go_duration(s).map(Some)
}

/// Karpenter's `Budget.IsActive`: whether the cron `schedule` (5 fields or a macro such as
/// `@daily`, always in UTC) fired within the `duration` leading up to `now`.
///
/// The window is half-open, `now - duration < t <= now`, exactly as Karpenter computes it: it asks
/// robfig/cron for the first firing strictly after `now - duration` and checks that it is not after
/// `now`. So a budget is active from the second its schedule fires (a firing at exactly `now`
/// counts) until `duration` later (a firing exactly `duration` ago no longer counts), and a zero
/// duration is never active.
pub fn schedule_active(
    schedule: &str,
    duration: Duration,
    now: Timestamp,
) -> Result<bool, TimingError> {
    let cron = parse_schedule(schedule)?;
    let window =
        TimeDelta::from_std(duration).map_err(|_| TimingError::DurationOutOfRange(duration))?;
    let checkpoint = now
        .checked_sub_signed(window)
        .ok_or(TimingError::DurationOutOfRange(duration))?;
    match cron.find_next_occurrence(&checkpoint, false) {
        Ok(next) => Ok(next <= now),
        // croner gives up after a bounded search, e.g. for "0 0 30 2 *" (30 February): such a
        // schedule never fires, so the budget is never active.
        Err(croner::errors::CronError::TimeSearchLimitExceeded) => Ok(false),
        Err(e) => Err(TimingError::ScheduleEvaluation {
            text: schedule.to_string(),
            reason: lowercase(&e),
        }),
    }
}

/// Whether `schedule` is a cron schedule Karpenter accepts (checked when a NodePool is read, so
/// a typo is an error naming the budget rather than a budget that silently never opens).
pub fn check_schedule(schedule: &str) -> Result<(), TimingError> {
    parse_schedule(schedule).map(|_| ())
}

/// Parses a schedule as robfig/cron's `ParseStandard` does: exactly five fields (no seconds, no
/// years) or one of the macros. croner knows every macro but `@midnight`, an alias of `@daily`.
fn parse_schedule(schedule: &str) -> Result<croner::Cron, TimingError> {
    let trimmed = schedule.trim();
    let pattern = if trimmed.eq_ignore_ascii_case("@midnight") {
        "@daily"
    } else {
        trimmed
    };
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(pattern)
        .map_err(|e| TimingError::MalformedSchedule {
            text: schedule.to_string(),
            reason: lowercase(&e),
        })
}

/// croner's messages are sentences ("Invalid pattern: ..."); error fragments here are lowercase.
fn lowercase(e: &croner::errors::CronError) -> String {
    let text = e.to_string();
    let text = text.trim_end_matches('.');
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        parse_timestamp(s).unwrap()
    }

    #[test]
    fn go_durations() {
        let secs = |s: &str| parse_go_duration(s).unwrap().as_secs_f64();
        assert_eq!(secs("30s"), 30.0);
        assert_eq!(secs("720h"), 720.0 * 3600.0);
        assert_eq!(secs("1h30m"), 5400.0);
        assert_eq!(secs("1.5h"), 5400.0);
        assert_eq!(secs("1h0m0s"), 3600.0);
        assert_eq!(secs(".5s"), 0.5);
        assert_eq!(secs("0s"), 0.0);
        assert_eq!(secs("0"), 0.0);
        assert_eq!(
            parse_go_duration("1ms2us3ns").unwrap(),
            Duration::from_nanos(1_002_003)
        );
        assert_eq!(parse_go_duration("7µs").unwrap(), Duration::from_micros(7));
        assert_eq!(
            parse_go_duration("2562047h").unwrap().as_secs(),
            2562047 * 3600
        );
    }

    #[test]
    fn malformed_durations() {
        for bad in [
            "5d", "", "-1s", "-0", "1", "s", ".s", "1h 30m", "h1", "Never", "2562048h", "1.5",
        ] {
            assert_eq!(
                parse_go_duration(bad),
                Err(TimingError::MalformedDuration(bad.to_string())),
                "{bad:?} should be malformed"
            );
        }
        assert_eq!(
            parse_go_duration("5d").unwrap_err().to_string(),
            r#"malformed duration "5d""#
        );
    }

    #[test]
    fn nillable_durations() {
        assert_eq!(parse_nillable("Never"), Ok(None));
        assert_eq!(
            parse_nillable("720h"),
            Ok(Some(Duration::from_secs(720 * 3600)))
        );
        assert!(parse_nillable("never").is_err());
    }

    #[test]
    fn timestamps() {
        let t = at("2024-05-01T10:00:00Z");
        assert_eq!(t.timestamp(), 1_714_557_600);
        assert_eq!(at("2024-05-01T12:00:00+02:00"), t);
        assert_eq!(
            at("2024-05-01T10:00:00.250Z").timestamp_subsec_millis(),
            250
        );
        let err = parse_timestamp("yesterday").unwrap_err();
        assert!(
            err.to_string()
                .starts_with(r#"malformed timestamp "yesterday": "#),
            "{err}"
        );
        assert!(parse_timestamp("").is_err());
    }

    #[test]
    fn every_minute_for_an_hour_is_always_active() {
        let hour = Duration::from_secs(3600);
        for now in [
            "2000-06-15T12:30:30Z",
            "2024-01-06T00:00:00Z",
            "2024-02-29T23:59:59.9Z",
        ] {
            assert_eq!(
                schedule_active("* * * * *", hour, at(now)),
                Ok(true),
                "{now}"
            );
        }
    }

    #[test]
    fn daily_window() {
        let ten_minutes = Duration::from_secs(600);
        assert_eq!(
            schedule_active("@daily", ten_minutes, at("2024-05-01T00:05:00Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("@daily", ten_minutes, at("2024-05-01T00:15:00Z")),
            Ok(false)
        );
        assert_eq!(
            schedule_active("@midnight", ten_minutes, at("2024-05-01T00:05:00Z")),
            Ok(true)
        );
        // The window is (now - duration, now]: a firing at now counts, one exactly duration ago
        // not.
        assert_eq!(
            schedule_active("@daily", ten_minutes, at("2024-05-01T00:00:00Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("@daily", ten_minutes, at("2024-05-01T00:09:59Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("@daily", ten_minutes, at("2024-05-01T00:10:00Z")),
            Ok(false)
        );
        assert_eq!(
            schedule_active("@daily", Duration::ZERO, at("2024-05-01T00:00:00Z")),
            Ok(false)
        );
    }

    #[test]
    fn weekday_business_hours() {
        let eight_hours = Duration::from_secs(8 * 3600);
        // 2024-05-04 is a Saturday, 2024-05-06 a Monday.
        assert_eq!(
            schedule_active("0 9 * * 1-5", eight_hours, at("2024-05-04T10:00:00Z")),
            Ok(false)
        );
        assert_eq!(
            schedule_active("0 9 * * 1-5", eight_hours, at("2024-05-06T10:00:00Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("0 9 * * MON-FRI", eight_hours, at("2024-05-06T16:59:00Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("0 9 * * 1-5", eight_hours, at("2024-05-06T17:00:00Z")),
            Ok(false)
        );
    }

    #[test]
    fn weekly_and_longer_macros() {
        let hour = Duration::from_secs(3600);
        // 2024-05-01 is a Wednesday; @weekly fires Sunday 00:00.
        assert_eq!(
            schedule_active("@weekly", hour, at("2024-05-01T00:30:00Z")),
            Ok(false)
        );
        assert_eq!(
            schedule_active("@weekly", hour, at("2024-05-05T00:30:00Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("@hourly", hour, at("2024-05-01T07:59:00Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("@monthly", hour, at("2024-05-01T00:30:00Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("@yearly", hour, at("2024-05-01T00:30:00Z")),
            Ok(false)
        );
        // Karpenter's test: @yearly with 24h at noon on 1 January is active.
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(
            schedule_active("@annually", day, at("2024-01-01T12:00:00Z")),
            Ok(true)
        );
        // A duration longer than the recurrence keeps the budget active throughout.
        assert_eq!(
            schedule_active("@daily", 2 * day, at("2024-01-07T00:00:00Z")),
            Ok(true)
        );
        assert_eq!(
            schedule_active("30 6 * * SUN", 6 * hour, at("2024-01-07T00:00:00Z")),
            Ok(false)
        );
    }

    #[test]
    fn impossible_schedule_is_never_active() {
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(
            schedule_active("0 0 30 2 *", day, at("2024-03-01T00:00:00Z")),
            Ok(false)
        );
    }

    #[test]
    fn bad_cron_text() {
        let hour = Duration::from_secs(3600);
        let now = at("2024-05-01T00:00:00Z");
        let bad_texts = [
            "",
            "not a cron",
            "* * * *",
            "0 * * * * *",
            "0 0 * * * 2024",
            "61 * * * *",
        ];
        for bad in bad_texts
            .into_iter()
            .chain(["@wrongly", "@every 1h", "0 0 * * tue-mon"])
        {
            let err = schedule_active(bad, hour, now).unwrap_err();
            assert!(
                matches!(err, TimingError::MalformedSchedule { .. }),
                "{bad:?}: {err:?}"
            );
            assert!(
                err.to_string()
                    .starts_with(&format!("malformed cron schedule {bad:?}: ")),
                "{err}"
            );
        }
    }

    #[test]
    fn duration_out_of_range() {
        let now = at("2024-05-01T00:00:00Z");
        assert_eq!(
            schedule_active("@daily", Duration::MAX, now),
            Err(TimingError::DurationOutOfRange(Duration::MAX))
        );
    }
}
