//! Parsing of the configuration's values, as the `BURN_SWAP*` variables and `FromStr` give
//! them: every error names the offending text.

use super::{Budget, Compression, PeerSpec};
use crate::error::{ConfigError, ParseError};

/// Parses `BURN_SWAP_PEERS`: `off`, or comma-separated peers, each either simulated,
/// `capacity@bandwidth` with a capacity as in budgets (`256MiB`) and a bandwidth in bytes
/// per second with a decimal or binary unit and an optional `/s` (`50GB/s`, `12.5GB`,
/// `900MiB/s`), or a device of the inner backend, `device:N@capacity` or, the same on CUDA,
/// `cuda:N@capacity` (`cuda:1@8GiB`).
pub(crate) fn parse_peers(text: &str) -> Result<Vec<PeerSpec>, ParseError> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") || text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .enumerate()
        .map(|(i, item)| -> Result<PeerSpec, ParseError> {
            let (first, second) = item.trim().split_once('@').ok_or_else(|| {
                format!("peer `{item}`: expected capacity@bandwidth or cuda:N@capacity, e.g. 256MiB@50GB/s")
            })?;
            let first = first.trim();
            let device = first
                .strip_prefix("cuda:")
                .map(|n| (n, true))
                .or_else(|| first.strip_prefix("device:").map(|n| (n, false)));
            if let Some((ordinal, cuda)) = device {
                let ordinal: usize = ordinal
                    .trim()
                    .parse()
                    .map_err(|_| format!("peer `{item}`: `{ordinal}` is not a device number"))?;
                return match parse_budget(second) {
                    Ok(Budget::Bytes(b)) if b > 0 && cuda => Ok(PeerSpec::cuda(ordinal, b)),
                    Ok(Budget::Bytes(b)) if b > 0 => Ok(PeerSpec::device(ordinal, b)),
                    _ => Err(format!("peer `{item}`: the capacity must be bytes, above 0").into()),
                };
            }
            let (capacity, bandwidth) = (first, second);
            let capacity = match parse_budget(capacity)
                .map_err(|e| format!("peer `{item}`: capacity: {e}"))?
            {
                Budget::Bytes(b) if b > 0 => b,
                _ => {
                    return Err(format!(
                        "peer `{item}`: the capacity must be bytes, above 0"
                    ).into());
                }
            };
            let rate = bandwidth.trim();
            let rate = rate
                .strip_suffix("/s")
                .or_else(|| rate.strip_suffix("/S"))
                .unwrap_or(rate);
            let split = rate
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rate.len());
            let (number, unit) = rate.split_at(split);
            let number: f64 = number
                .parse()
                .map_err(|_| format!("peer `{item}`: bandwidth `{bandwidth}` is not a number"))?;
            let unit = match unit.trim().to_ascii_lowercase().as_str() {
                "b" | "" => 1.0,
                "kb" => 1e3,
                "mb" => 1e6,
                "gb" => 1e9,
                "kib" => 1024.0,
                "mib" => (1u64 << 20) as f64,
                "gib" => (1u64 << 30) as f64,
                other => return Err(format!("peer `{item}`: unknown bandwidth unit `{other}`").into()),
            };
            let bandwidth = number * unit;
            if !(bandwidth.is_finite() && bandwidth > 0.0) {
                return Err(format!("peer `{item}`: the bandwidth must be above 0").into());
            }
            Ok(PeerSpec::simulated(format!("peer{i}"), capacity, bandwidth))
        })
        .collect()
}

impl core::str::FromStr for Budget {
    type Err = ParseError;

    /// As `BURN_SWAP_BUDGET`: bytes with an optional unit (`512MiB`), or a fraction of device
    /// memory (`0.4`, `40%`).
    fn from_str(text: &str) -> Result<Self, ParseError> {
        parse_budget(text)
    }
}

impl core::str::FromStr for Compression {
    type Err = ParseError;

    /// As `BURN_SWAP_COMPRESS`: `off`, `on`, `auto`, or `on:0.8`-style with a threshold.
    fn from_str(text: &str) -> Result<Self, ParseError> {
        parse_compression(text)
    }
}

impl PeerSpec {
    /// Parses a list of peers as `BURN_SWAP_PEERS` gives it: `off`, or comma-separated
    /// `capacity@bandwidth` (simulated) or `device:N@capacity` / `cuda:N@capacity`.
    pub fn parse_list(text: &str) -> Result<Vec<PeerSpec>, ParseError> {
        parse_peers(text)
    }
}

/// Parses `off`, `on`, `auto`, or `on:R` / `auto:R` with a size threshold `R` in `(0, 1]`.
pub(crate) fn parse_compression(text: &str) -> Result<Compression, ParseError> {
    let text = text.trim().to_ascii_lowercase();
    let (mode, ratio) = match text.split_once(':') {
        Some((mode, ratio)) => {
            let ratio: f64 = ratio
                .trim()
                .parse()
                .map_err(|_| format!("threshold {ratio:?} is not a number"))?;
            if !(ratio > 0.0 && ratio <= 1.0) {
                return Err(format!("threshold {ratio} is outside (0, 1]").into());
            }
            (mode.trim().to_string(), ratio)
        }
        None => (text.clone(), Compression::DEFAULT_MAX_RATIO),
    };
    match mode.as_str() {
        "off" | "0" | "false" | "no" => Ok(Compression::Off),
        "on" | "1" | "true" | "yes" => Ok(Compression::On { max_ratio: ratio }),
        "auto" => Ok(Compression::Auto { max_ratio: ratio }),
        _ => Err("expected `off`, `on`, `auto`, or `on:0.8`-style with a threshold".into()),
    }
}

pub(super) fn invalid(variable: &'static str, value: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidEnv {
        variable,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

pub(super) fn parse_switch(variable: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(invalid(
            variable,
            value,
            "expected on/off, 1/0 or true/false",
        )),
    }
}

pub(super) fn check_fraction(fraction: f64) -> Result<(), ConfigError> {
    if fraction.is_finite() && fraction > 0.0 && fraction <= 1.0 {
        Ok(())
    } else {
        Err(ConfigError::FractionOutOfRange(fraction))
    }
}

/// Parses a budget: a byte count with an optional unit, or a fraction of device memory.
///
/// A number with a decimal point and no unit (`0.4`) or a percentage (`40%`) is a fraction;
/// an integer without unit is bytes. Units are case-insensitive: `B`; decimal `KB`, `MB`,
/// `GB`, `TB`; binary `KiB`, `MiB`, `GiB`, `TiB`, and `K`, `M`, `G`, `T` as binary too.
pub(crate) fn parse_budget(text: &str) -> Result<Budget, ParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "empty value; expected bytes such as `512MiB` or a fraction such as `0.4`".into(),
        );
    }
    if let Some(percent) = text.strip_suffix('%') {
        let value: f64 = percent
            .trim()
            .parse()
            .map_err(|_| format!("`{percent}` is not a number"))?;
        let fraction = value / 100.0;
        check_fraction(fraction).map_err(|e| e.to_string())?;
        return Ok(Budget::DeviceFraction(fraction));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number = number.replace('_', "");
    let unit = unit.trim().to_ascii_lowercase();
    if unit.is_empty() && number.contains('.') {
        let fraction: f64 = number
            .parse()
            .map_err(|_| format!("`{number}` is not a number"))?;
        check_fraction(fraction).map_err(|e| e.to_string())?;
        return Ok(Budget::DeviceFraction(fraction));
    }
    let multiplier: u64 = match unit.as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown unit `{other}`; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
            )
            .into());
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{number}` is not a number"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("`{number}` is not a size").into());
    }
    let bytes = value * multiplier as f64;
    if bytes < 1.0 {
        return Err("a budget of 0 bytes can hold no tensor".into());
    }
    if bytes > u64::MAX as f64 {
        return Err("too large".into());
    }
    Ok(Budget::Bytes(bytes as u64))
}
