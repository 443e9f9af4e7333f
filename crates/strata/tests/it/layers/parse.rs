//! The source scanner of the layering checks: strips comments and string literals, drops
//! `#[cfg(test)]` items, and reads the `crate::…`/`super::…` references and the `pub use`
//! statements of a module.

/// Removes comments, string/char literals (replaced by `""`), keeping everything else.
pub(super) fn strip(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let n = s.len();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < n {
        let c = s[i];
        if c == '/' && i + 1 < n && s[i + 1] == '/' {
            while i < n && s[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && i + 1 < n && s[i + 1] == '*' {
            let mut depth = 0;
            while i < n {
                if s[i] == '/' && i + 1 < n && s[i + 1] == '*' {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && i + 1 < n && s[i + 1] == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        // Raw strings: r"…", r#"…"#, br#"…"# (the `r` starts a token).
        if c == 'r'
            && (i == 0 || !ident(s[i - 1]) || (s[i - 1] == 'b' && (i < 2 || !ident(s[i - 2]))))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while j < n && s[j] == '#' {
                hashes += 1;
                j += 1;
            }
            if j < n && s[j] == '"' {
                j += 1;
                'raw: while j < n {
                    if s[j] == '"' {
                        let mut k = 0;
                        while k < hashes && j + 1 + k < n && s[j + 1 + k] == '#' {
                            k += 1;
                        }
                        if k == hashes {
                            j += 1 + hashes;
                            break 'raw;
                        }
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' {
            let mut j = i + 1;
            while j < n && s[j] != '"' {
                if s[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j + 1;
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '\u{..}', '"'), else a lifetime.
            if i + 1 < n && s[i + 1] == '\\' {
                let mut j = i + 2;
                while j < n && s[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
                continue;
            }
            if i + 2 < n && s[i + 2] == '\'' {
                out.push_str("' '");
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Index just past the item starting at `from`: up to its first `;`, or through its first
/// `{ … }` block when that comes first.
pub(crate) fn item_end(s: &str, from: usize) -> usize {
    let b = s.as_bytes();
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b';' => return i + 1,
            b'{' => {
                let mut depth = 0;
                while i < b.len() {
                    match b[i] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                return i + 1;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                return i;
            }
            _ => i += 1,
        }
    }
    i
}

/// Removes every `#[cfg(test)]` item; returns the code and the names of the test-only
/// file modules it declared (`#[cfg(test)] mod tests;`).
pub(super) fn drop_test_items(code: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_files = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let end = item_end(after, 0);
        let item = after[..end].trim();
        let words: Vec<&str> = item
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        if item.ends_with(';') {
            if let Some(p) = words.iter().position(|w| *w == "mod") {
                if let Some(name) = words.get(p + 1) {
                    test_files.push(name.to_string());
                }
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    (out, test_files)
}

/// The first path segment of each item of a use tree group starting at `s[0] == '{'`,
/// with the rest of each item's path (`{a::b, c}` → `[["a","b"], ["c"]]`). Nested groups
/// give their prefix only.
fn group_items(s: &str) -> Vec<Vec<String>> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push(std::mem::take(&mut cur));
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        if depth >= 1 {
            cur.push(c);
        }
    }
    items
        .iter()
        .map(|it| {
            let it = it.split(" as ").next().unwrap_or("");
            let path = it.split('{').next().unwrap_or("");
            path.split("::")
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty() && p != "*")
                .collect::<Vec<_>>()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

pub(crate) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every absolute path referenced through `crate::` or `super::` in `code`, resolved
/// against `module` (the file's module path), each with the byte offset of its reference.
pub(super) fn references(code: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    let mut refs = Vec::new();
    let offsets: Vec<usize> = code.char_indices().map(|(o, _)| o).collect();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == ':');
        let rest: String = bytes[i..bytes.len().min(i + 6)].iter().collect();
        if !starts_word || !(rest.starts_with("crate") || rest.starts_with("super")) {
            i += 1;
            continue;
        }
        let at = offsets[i];
        let mut base: Vec<String>;
        let mut j;
        if rest.starts_with("crate") {
            base = Vec::new();
            j = i + 5;
        } else {
            base = module[..module.len().saturating_sub(1)].to_vec();
            j = i + 5;
        }
        if !(j + 1 < bytes.len() && bytes[j] == ':' && bytes[j + 1] == ':') {
            i = j;
            continue;
        }
        j += 2;
        // Further `super::`.
        loop {
            let tail: String = bytes[j..bytes.len().min(j + 7)].iter().collect();
            if tail.starts_with("super::") {
                base.pop();
                j += 7;
            } else {
                break;
            }
        }
        if j < bytes.len() && bytes[j] == '{' {
            let group: String = bytes[j..].iter().collect();
            for item in group_items(&group) {
                let mut p = base.clone();
                p.extend(item);
                refs.push((at, p));
            }
        } else {
            let mut p = base.clone();
            let mut k = j;
            loop {
                let start = k;
                while k < bytes.len() && is_ident(bytes[k]) {
                    k += 1;
                }
                if k == start {
                    break;
                }
                p.push(bytes[start..k].iter().collect());
                if k + 2 < bytes.len()
                    && bytes[k] == ':'
                    && bytes[k + 1] == ':'
                    && is_ident(bytes[k + 2])
                {
                    k += 2;
                } else {
                    break;
                }
            }
            if p.len() > base.len() {
                refs.push((at, p));
            }
        }
        i = j;
    }
    refs
}

/// The `pub use crate::…;` statements of `code` (start offset, end offset, text).
pub(crate) fn pub_uses(code: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("pub use ") {
        let start = from + at;
        let prev = code[..start].chars().last();
        let end = code[start..]
            .find(';')
            .map_or(code.len(), |e| start + e + 1);
        if prev.is_none_or(|c| !is_ident(c)) {
            out.push((start, end, code[start..end].to_string()));
        }
        from = end;
    }
    out
}

/// The names a `pub use` statement brings in (the last segment or its alias), each with
/// its full path.
pub(crate) fn used_names(stmt: &str, module: &[String]) -> Vec<(String, Vec<String>)> {
    let body = stmt
        .trim_start_matches("pub use ")
        .trim_end_matches(';')
        .trim();
    let (body, alias) = match body.split_once(" as ") {
        Some((b, a)) if !b.contains('{') => (b.trim(), Some(a.trim())),
        _ => (body, None),
    };
    let mut out = Vec::new();
    let (prefix, group) = match body.find('{') {
        Some(b) => (&body[..b], Some(&body[b..])),
        None => (body, None),
    };
    let mut base: Vec<String> = prefix
        .split("::")
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    match base.first().map(String::as_str) {
        Some("crate") => {
            base.remove(0);
        }
        Some("super") => {
            base.remove(0);
            let mut b = module[..module.len().saturating_sub(1)].to_vec();
            b.extend(base);
            base = b;
        }
        Some("self") => {
            base.remove(0);
            let mut b = module.to_vec();
            b.extend(base);
            base = b;
        }
        _ => {
            let mut b = module.to_vec();
            b.extend(base);
            base = b;
        }
    }
    let mut push = |item: &str| {
        let mut parts = item.split(" as ");
        let path = parts.next().unwrap_or("").trim();
        let alias = parts.next().map(str::trim);
        let segs: Vec<String> = path
            .split("::")
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty() && p != "self")
            .collect();
        let mut full = base.clone();
        full.extend(segs.iter().cloned());
        let name = alias
            .map(str::to_string)
            .or_else(|| full.last().cloned())
            .unwrap_or_default();
        if !name.is_empty() && name != "*" {
            out.push((name, full));
        }
    };
    match group {
        None => {
            // `base` already holds the whole path.
            let name = alias
                .map(str::to_string)
                .or_else(|| base.last().cloned())
                .unwrap_or_default();
            out.push((name, base.clone()));
        }
        Some(g) => {
            let inner = g.trim().trim_start_matches('{').trim_end_matches('}');
            let mut depth = 0;
            let mut cur = String::new();
            for c in inner.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        push(&cur);
                        cur.clear();
                        continue;
                    }
                    _ => {}
                }
                cur.push(c);
            }
            if !cur.trim().is_empty() {
                push(&cur);
            }
        }
    }
    out
}
