//! A small command-line parser shared by the example trainers: `--name value` pairs and bare
//! `--flag`s, with typed errors that name the flag and the value.

use std::collections::HashMap;
use std::str::FromStr;

/// Parsed arguments.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<String, String>,
    flags: Vec<String>,
}

/// A command line that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

impl Args {
    /// Parses `args` (without the program name). `flags` lists the options that take no value;
    /// every other `--name` takes the next argument as its value.
    pub fn parse(
        args: impl IntoIterator<Item = String>,
        flags: &[&str],
        known: &[&str],
    ) -> Result<Self, ArgError> {
        let mut out = Args::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(ArgError(format!("unexpected argument `{arg}`")));
            };
            let (name, inline) = match name.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (name.to_string(), None),
            };
            if flags.contains(&name.as_str()) {
                out.flags.push(name);
            } else if known.contains(&name.as_str()) {
                let value = match inline {
                    Some(v) => v,
                    None => args
                        .next()
                        .ok_or_else(|| ArgError(format!("--{name} needs a value")))?,
                };
                out.values.insert(name, value);
            } else {
                return Err(ArgError(format!(
                    "unknown option --{name}; known: {}",
                    known
                        .iter()
                        .chain(flags)
                        .map(|k| format!("--{k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        Ok(out)
    }

    /// The value of `--name` parsed as `T`, or `default` when absent.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, ArgError> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| ArgError(format!("invalid value `{v}` for --{name}"))),
        }
    }

    /// The raw value of `--name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Whether the bare flag `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }
}

/// The error for a `--device` this build does not know: flex always, wgpu with the `wgpu`
/// feature, cuda with the `cuda` feature.
pub fn unknown_device(name: &str) -> ArgError {
    let mut known = vec!["flex"];
    let mut missing = Vec::new();
    for (device, built) in [
        ("wgpu", cfg!(feature = "wgpu")),
        ("cuda", cfg!(feature = "cuda")),
    ] {
        if built {
            known.push(device);
        } else {
            missing.push(format!("{device} needs the `{device}` feature"));
        }
    }
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(" ({})", missing.join("; "))
    };
    ArgError(format!(
        "--device {name}: expected {}{missing}",
        known.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Args, ArgError> {
        Args::parse(
            line.split_whitespace().map(String::from),
            &["quiet"],
            &["steps", "budget"],
        )
    }

    #[test]
    fn parses_values_and_flags() {
        let args = parse("--steps 5 --budget=0.25 --quiet").unwrap();
        assert_eq!(args.get("steps", 1usize), Ok(5));
        assert_eq!(args.value("budget"), Some("0.25"));
        assert!(args.flag("quiet"));
        assert_eq!(args.get("missing", 7u32), Ok(7));
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(parse("--steps").is_err());
        assert!(
            parse("--stpes 5")
                .unwrap_err()
                .0
                .contains("unknown option --stpes")
        );
        assert!(parse("steps").is_err());
        assert!(
            parse("--steps five")
                .unwrap()
                .get("steps", 0usize)
                .unwrap_err()
                .0
                .contains("five")
        );
    }
}
