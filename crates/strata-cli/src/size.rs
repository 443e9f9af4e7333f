//! Parsing of byte sizes (`4MiB`, `512KiB`, `100B`, `4096`) and non-zero counts.

/// Parses a size: a bare number of bytes or a number with `B`, `KiB`, `MiB`, `GiB`
/// (also `K`, `M`, `G`, `KB`, `MB`, `GB` as binary multiples). Zero is refused.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "`{s}` is not a size; use a number of bytes or a unit like 4MiB, 512KiB, 100B"
        ));
    }
    let n: usize = num
        .parse()
        .map_err(|_| format!("`{s}` is too large a size"))?;
    let mult: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{s}`; use B, KiB, MiB or GiB"
            ))
        }
    };
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("`{s}` is too large a size"))?;
    if bytes == 0 {
        return Err("size must be greater than zero".to_string());
    }
    Ok(bytes)
}

/// Parses a count that must be at least 1.
pub fn parse_nonzero(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a positive whole number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("100B"), Ok(100));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("0MiB").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("3 parsecs").is_err());
        assert!(parse_size("99999999999999999999999").is_err());
        assert_eq!(parse_nonzero("2"), Ok(2));
        assert!(parse_nonzero("0").is_err());
    }
}
