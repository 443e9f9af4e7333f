//! Parsing of byte sizes (`4MiB`, `512KiB`, `100B`, `4096`) and non-zero counts.

/// Parses a size: a whole number of bytes, bare or with a binary unit `B`, `KiB`, `MiB`,
/// `GiB` (also `K`, `M`, `G`). Zero, fractions (`1.5MiB`) and the ambiguous decimal
/// units `KB`, `MB`, `GB` are refused with a message naming the alternative.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    if t.contains(['.', ',']) {
        return Err(format!(
            "`{s}` is not a whole number: sizes take whole numbers only (no fractions or separators); use a smaller unit instead, e.g. 1536KiB rather than 1.5MiB"
        ));
    }
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
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        decimal @ ("kb" | "mb" | "gb") => {
            let (binary, bytes) = match decimal {
                "kb" => ("KiB", 1u64 << 10),
                "mb" => ("MiB", 1 << 20),
                _ => ("GiB", 1 << 30),
            };
            return Err(format!(
                "ambiguous size unit `{}` in `{s}` (decimal or binary?); use the binary unit {binary} (1{binary} = {bytes} bytes) or a number of bytes",
                unit.trim()
            ));
        }
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
    if u64::try_from(bytes).map_or(true, |b| b > MAX_SIZE) {
        return Err(format!(
            "`{s}` is larger than the maximum size of 4GiB ({MAX_SIZE} bytes); no record or batch of a supported store is that large, use at most 4GiB"
        ));
    }
    Ok(bytes)
}

/// The largest size a size option accepts (4 GiB): more than any record or batch a
/// supported backend holds, small enough that buffers of that size are never attempted
/// by accident (`--max-bytes 18446744073709551615`).
pub const MAX_SIZE: u64 = 4 << 30;

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
        // Sane maxima: a size that fits usize but no store can hold is refused.
        let huge = parse_size("18446744073709551615").unwrap_err();
        assert!(huge.contains("4GiB"), "{huge}");
        assert!(parse_size("5GiB").is_err());
        assert!(parse_size("4097M").is_err());
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("2K"), Ok(2 << 10));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size(" 3mib "), Ok(3 << 20));
        assert_eq!(parse_nonzero("2"), Ok(2));
        assert!(parse_nonzero("0").is_err());
    }

    #[test]
    fn fractions_are_refused_with_whole_numbers_only() {
        for s in ["1.5MiB", "0.5", "2,5KiB", "1.MiB", ".5MiB", "1,024"] {
            let err = parse_size(s).unwrap_err();
            assert!(err.contains("whole numbers only"), "{s}: {err}");
            assert!(err.contains(&format!("`{s}`")), "{s}: {err}");
        }
    }

    #[test]
    fn decimal_units_are_refused_with_the_binary_unit_to_use() {
        for (s, binary, bytes) in [
            ("4KB", "KiB", "1024"),
            ("10MB", "MiB", "1048576"),
            ("1gb", "GiB", "1073741824"),
        ] {
            let err = parse_size(s).unwrap_err();
            assert!(err.starts_with("ambiguous size unit"), "{s}: {err}");
            assert!(err.contains(&format!("`{s}`")), "{s}: {err}");
            assert!(
                err.contains(&format!(
                    "use the binary unit {binary} (1{binary} = {bytes} bytes)"
                )),
                "{s}: {err}"
            );
        }
    }
}
