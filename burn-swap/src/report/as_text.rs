//! Serde of a configuration enum as its text (`planned`, `lru`, `on:0.7`), so that the
//! report's JSON keeps the strings it has always had while the report holds the enum.

use core::fmt::Display;
use core::str::FromStr;

pub fn serialize<T: Display, S: serde::Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
where
    T: FromStr,
    T::Err: Display,
    D: serde::Deserializer<'de>,
{
    let text = <String as serde::Deserialize>::deserialize(d)?;
    text.parse().map_err(serde::de::Error::custom)
}
