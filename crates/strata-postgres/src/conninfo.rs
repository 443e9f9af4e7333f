//! Connection strings: `postgres://` URLs and `key=value` conninfo strings, parsed here
//! (not by the driver) so that the password is taken out before anything else looks at
//! the string — it never reaches an error message, a log line or a displayed target.
//!
//! * URL userinfo ends at the **last** `@` before the query string, so an unescaped `@`
//!   (or `:`, `/`) inside the password still belongs to the password.
//! * `?password=…` and `password=…` (conninfo) are accepted and removed like the userinfo
//!   password.
//! * strata's own parameters (`strata_table`, the timeouts) are removed too; the rest is
//!   handed to the driver as a conninfo string of quoted values.

use crate::error::PgError;
use crate::tls::{SslMode, TlsParams};

/// A connection string taken apart.
#[derive(Debug, Default, Clone)]
pub(crate) struct Parsed {
    /// Driver parameters (`host`, `port`, `user`, `dbname`, `sslmode`, ...), in order.
    pub(crate) params: Vec<(String, String)>,
    /// The password, if any (kept out of `params`).
    pub(crate) password: Option<Vec<u8>>,
    /// strata's own parameters (`strata_*`), in order.
    pub(crate) strata: Vec<(String, String)>,
}

impl Parsed {
    /// The driver parameters as one conninfo string (`key='value' ...`), password excluded.
    pub(crate) fn conninfo(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Removes driver parameter `key` and returns its (last) value.
    pub(crate) fn take_param(&mut self, key: &str) -> Option<String> {
        let mut found = None;
        self.params.retain(|(k, v)| {
            if k == key {
                found = Some(v.clone());
                false
            } else {
                true
            }
        });
        found
    }

    /// Removes the TLS parameters (`sslmode`, default `prefer`, and `sslrootcert`): they
    /// mean more here than the driver understands (`verify-ca`, `verify-full`).
    pub(crate) fn take_tls(&mut self) -> Result<TlsParams, PgError> {
        let mode = match self.take_param("sslmode") {
            Some(v) => SslMode::parse(&v)?,
            None => SslMode::Prefer,
        };
        let root_cert = self
            .take_param("sslrootcert")
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from);
        Ok(TlsParams { mode, root_cert })
    }

    /// Removes and returns strata parameter `key` (an error when given twice).
    pub(crate) fn take_strata(&mut self, key: &str) -> Result<Option<String>, PgError> {
        let mut found = None;
        let mut rest = Vec::with_capacity(self.strata.len());
        for (k, v) in std::mem::take(&mut self.strata) {
            if k == key {
                if found.replace(v).is_some() {
                    return Err(invalid(format!("`{key}` is given more than once")));
                }
            } else {
                rest.push((k, v));
            }
        }
        self.strata = rest;
        Ok(found)
    }
}

fn invalid(reason: String) -> PgError {
    PgError::InvalidUrl { reason }
}

/// A user-supplied value as a message may echo it (escaped, shortened when long).
pub(crate) fn shown_value(s: &str) -> String {
    strata_store::shown_text(s)
}

/// libpq's connection keywords (and strata's own `strata_*`): a string whose first
/// `key=` is one of them is a conninfo string, not a path.
const KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "service",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "sslmode",
    "sslnegotiation",
    "sslcompression",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslrootcert",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "requirepeer",
    "require_auth",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "gssencmode",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "channel_binding",
    "replication",
    "target_session_attrs",
    "load_balance_hosts",
];

/// True when `s` is a PostgreSQL connection string in either of libpq's forms: a
/// `postgres://` / `postgresql://` URL, or `key=value` pairs whose first key is a libpq
/// connection keyword (`host=db user=app dbname=app`) or a `strata_*` parameter.
pub fn is_connection_string(s: &str) -> bool {
    if strip_scheme(s).is_some() {
        return true;
    }
    let t = s.trim_start();
    let Some(eq) = t.find('=') else {
        return false;
    };
    let key = t[..eq].trim_end();
    !key.is_empty()
        && !key.contains(char::is_whitespace)
        && (KEYWORDS.contains(&key) || is_strata_param(key))
}

/// True for strata's own connection-string parameters.
fn is_strata_param(key: &str) -> bool {
    key.starts_with("strata_")
}

/// Takes `s` (a URL or a conninfo string) apart.
pub(crate) fn parse(s: &str) -> Result<Parsed, PgError> {
    let pairs = match strip_scheme(s) {
        Some(rest) => url_pairs(rest)?,
        None => conninfo_pairs(s)?,
    };
    let mut parsed = Parsed::default();
    for (k, v) in pairs {
        if k == "password" {
            if parsed.password.replace(v.into_bytes()).is_some() {
                return Err(invalid("the password is given more than once".into()));
            }
        } else if is_strata_param(&k) {
            parsed.strata.push((k, v));
        } else {
            parsed.params.push((k, v));
        }
    }
    Ok(parsed)
}

fn strip_scheme(s: &str) -> Option<&str> {
    s.strip_prefix("postgres://")
        .or_else(|| s.strip_prefix("postgresql://"))
}

/// The index of the `@` that ends the userinfo of `rest` (a URL after its scheme), if
/// the URL has userinfo: the last `@` before the first `?`; when there is none, a `?`
/// before any `/` is taken as part of the password and the search goes on to the last `@`
/// before the next `?`.
fn userinfo_at(rest: &str) -> Option<usize> {
    let first_q = rest.find('?').unwrap_or(rest.len());
    if let Some(at) = rest[..first_q].rfind('@') {
        return Some(at);
    }
    if first_q == rest.len() || rest[..first_q].contains('/') {
        return None;
    }
    let first_at = first_q + rest[first_q..].find('@')?;
    let next_q = rest[first_at..]
        .find('?')
        .map_or(rest.len(), |i| first_at + i);
    rest[..next_q].rfind('@')
}

/// `(userinfo, host-and-path, query)` of a URL after its scheme.
fn split_url(rest: &str) -> (Option<&str>, &str, Option<&str>) {
    let (userinfo, after) = match userinfo_at(rest) {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    match after.split_once('?') {
        Some((hostpath, query)) => (userinfo, hostpath, Some(query)),
        None => (userinfo, after, None),
    }
}

fn url_pairs(rest: &str) -> Result<Vec<(String, String)>, PgError> {
    let (userinfo, hostpath, query) = split_url(rest);
    let mut pairs = Vec::new();
    if let Some(userinfo) = userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            pairs.push(("user".to_string(), decode(user)?));
        }
        if let Some(p) = password {
            pairs.push(("password".to_string(), decode_lossless(p)));
        }
    }
    let (hosts, dbname) = match hostpath.split_once('/') {
        Some((h, d)) => (h, Some(d)),
        None => (hostpath, None),
    };
    if !hosts.is_empty() {
        let mut host_list = Vec::new();
        let mut port_list = Vec::new();
        for chunk in hosts.split(',') {
            let (host, port) = if let Some(v6) = chunk.strip_prefix('[') {
                let (h, after) = v6
                    .split_once(']')
                    .ok_or_else(|| invalid("an IPv6 host has no closing `]`".into()))?;
                let port = match after {
                    "" => None,
                    p => Some(p.strip_prefix(':').ok_or_else(|| {
                        invalid("an IPv6 host must be followed by `:PORT` or nothing".into())
                    })?),
                };
                (h, port)
            } else {
                match chunk.split_once(':') {
                    Some((h, p)) => (h, Some(p)),
                    None => (chunk, None),
                }
            };
            host_list.push(decode(host)?);
            port_list.push(decode(port.unwrap_or(""))?);
        }
        pairs.push(("host".to_string(), host_list.join(",")));
        if port_list.iter().any(|p| !p.is_empty()) {
            pairs.push(("port".to_string(), port_list.join(",")));
        }
    }
    if let Some(db) = dbname.filter(|d| !d.is_empty()) {
        pairs.push(("dbname".to_string(), decode(db)?));
    }
    if let Some(query) = query {
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').ok_or_else(|| {
                invalid("a query parameter has no `=VALUE`; use `?name=value&...`".into())
            })?;
            let k = decode(k)?;
            let v = if k == "password" {
                decode_lossless(v)
            } else {
                decode(v)?
            };
            pairs.push((k, v));
        }
    }
    Ok(pairs)
}

/// Percent-decodes `s` (a `%` not followed by two hex digits stays as it is).
fn decode_bytes(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h << 4) | l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

fn decode(s: &str) -> Result<String, PgError> {
    String::from_utf8(decode_bytes(s))
        .map_err(|_| invalid("a percent-encoded part is not UTF-8".into()))
}

/// Decodes a password; bytes that are not UTF-8 are kept as the driver would send them.
fn decode_lossless(s: &str) -> String {
    let bytes = decode_bytes(s);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
}

/// `key = value` pairs of a conninfo string; values may be single-quoted with `\'` and
/// `\\` escapes.
fn conninfo_pairs(s: &str) -> Result<Vec<(String, String)>, PgError> {
    let mut pairs = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            // The "key" may be a stray piece of a value: it is not echoed.
            return Err(invalid(
                "a conninfo parameter has no `=`; use `key=value` pairs or a postgres:// URL"
                    .into(),
            ));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => break,
                    },
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => {
                        return Err(invalid(format!(
                            "the quoted value of conninfo parameter `{key}` is not closed"
                        )))
                    }
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        value.push(n);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

/// `s` as it may be shown: the password (userinfo, `?password=` or conninfo
/// `password=`) replaced by `***`; everything else as given.
pub fn redact(s: &str) -> String {
    let Some(rest) = strip_scheme(s) else {
        return redact_conninfo(s);
    };
    let scheme = &s[..s.len() - rest.len()];
    let (userinfo, hostpath, query) = split_url(rest);
    let pre = match userinfo {
        Some(info) => match info.split_once(':') {
            Some((user, _)) => format!("{user}:***@{hostpath}"),
            None => format!("{info}@{hostpath}"),
        },
        None => hostpath.to_string(),
    };
    let query = query.map(|q| {
        q.split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if decode_bytes(k) == b"password" => format!("{k}=***"),
                _ => pair.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    match query {
        Some(q) => format!("{scheme}{pre}?{q}"),
        None => format!("{scheme}{pre}"),
    }
}

fn redact_conninfo(s: &str) -> String {
    match conninfo_pairs(s) {
        Ok(pairs) => pairs
            .into_iter()
            .map(|(k, v)| {
                if k == "password" {
                    format!("{k}=***")
                } else if v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == '\'') {
                    format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
                } else {
                    format!("{k}={v}")
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        // Not even key=value pairs: show nothing of it.
        Err(_) => "(an unparseable postgres connection string)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(p: &'a Parsed, key: &str) -> Option<&'a str> {
        p.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn userinfo_passwords_may_hold_unescaped_at_colon_slash_and_question_marks() {
        for (url, password) in [
            ("postgres://alice:s3cret@db:5432/app", "s3cret"),
            ("postgres://alice:p@ss@db:5432/app", "p@ss"),
            ("postgres://alice:a:b@c@db/app?sslmode=disable", "a:b@c"),
            ("postgresql://alice:p%40ss@db/app", "p@ss"),
            ("postgres://alice:p/w@db/app", "p/w"),
            ("postgres://alice:p?w@db/app?sslmode=disable", "p?w"),
        ] {
            let p = parse(url).unwrap();
            assert_eq!(p.password.as_deref(), Some(password.as_bytes()), "{url}");
            assert_eq!(get(&p, "user"), Some("alice"), "{url}");
            assert_eq!(get(&p, "dbname"), Some("app"), "{url}");
            assert!(get(&p, "host").unwrap().starts_with("db"), "{url}");
            assert!(!p.conninfo().contains(password), "{url}");
            let shown = redact(url);
            assert!(!shown.contains(password), "{url} -> {shown}");
            assert!(shown.contains("alice:***@db"), "{shown}");
        }
    }

    #[test]
    fn query_and_conninfo_passwords_are_taken_out() {
        let p = parse("postgres://alice@db/app?password=s3cret&sslmode=disable&strata_table=t")
            .unwrap();
        assert_eq!(p.password.as_deref(), Some(&b"s3cret"[..]));
        assert_eq!(get(&p, "sslmode"), Some("disable"));
        assert_eq!(p.strata, vec![("strata_table".into(), "t".into())]);
        assert!(!p.conninfo().contains("s3cret"));
        assert_eq!(
            redact("postgres://alice@db/app?password=s3cret&sslmode=disable"),
            "postgres://alice@db/app?password=***&sslmode=disable"
        );

        let err = parse("host=db user=alice password='x'secret dbname=app").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        let p = parse(r"host=db user=alice password='s3 cr\'et' dbname=app").unwrap();
        assert_eq!(p.password.as_deref(), Some(&b"s3 cr'et"[..]));
        assert_eq!(get(&p, "dbname"), Some("app"));
        let shown = redact(r"host=db user=alice password='s3 cr\'et' dbname=app");
        assert_eq!(shown, "host=db user=alice password=*** dbname=app");
    }

    #[test]
    fn an_at_in_a_query_value_is_not_userinfo() {
        let p = parse("postgres://db/app?application_name=a@b").unwrap();
        assert_eq!(get(&p, "host"), Some("db"));
        assert_eq!(get(&p, "application_name"), Some("a@b"));
        assert_eq!(p.password, None);
        let p = parse("postgres://alice:x@y@db/app?application_name=a@b").unwrap();
        assert_eq!(p.password.as_deref(), Some(&b"x@y"[..]));
        assert_eq!(get(&p, "application_name"), Some("a@b"));
        let shown = redact("postgres://alice:x@y@db/app?application_name=a@b");
        assert_eq!(shown, "postgres://alice:***@db/app?application_name=a@b");
    }

    #[test]
    fn hosts_ports_and_ipv6() {
        let p = parse("postgres://u@[::1]:5433,h2/db").unwrap();
        assert_eq!(get(&p, "host"), Some("::1,h2"));
        assert_eq!(get(&p, "port"), Some("5433,"));
        let p = parse("postgres://%2Fvar%2Frun%2Fpostgresql/db").unwrap();
        assert_eq!(get(&p, "host"), Some("/var/run/postgresql"));
        assert!(parse("postgres://u@[::1/db").is_err());
        assert!(parse("postgres://u@h/db?novalue").is_err());
        assert!(parse("host=h password").is_err());
    }
}
