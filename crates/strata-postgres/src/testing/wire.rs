//! A TCP relay in front of a server that counts the protocol messages its clients send:
//! for tests that pin how many statements and round trips an operation costs (issue 24:
//! a `get` is one statement in one round trip).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The frontend messages a [`WireCounter`]'s clients sent, counted by type (after the
/// startup exchange).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// `Parse` (`P`): a statement prepared (named, or unnamed for one execution).
    pub parse: u64,
    /// `Bind` (`B`): parameters bound to a prepared statement.
    pub bind: u64,
    /// `Describe` (`D`): a statement's or portal's row description asked for.
    pub describe: u64,
    /// `Execute` (`E`): one execution of a bound statement.
    pub execute: u64,
    /// `Query` (`Q`): a simple-protocol query string (one or more statements).
    pub query: u64,
    /// `Sync` (`S`): the end of an extended-protocol exchange — one round trip.
    pub sync: u64,
    /// Every other message type.
    pub other: u64,
}

impl Sent {
    /// The messages sent between `before` and `self`.
    pub fn since(&self, before: Sent) -> Sent {
        Sent {
            parse: self.parse - before.parse,
            bind: self.bind - before.bind,
            describe: self.describe - before.describe,
            execute: self.execute - before.execute,
            query: self.query - before.query,
            sync: self.sync - before.sync,
            other: self.other - before.other,
        }
    }
}

#[derive(Default)]
struct Counts {
    by_type: [AtomicU64; 7],
}

impl Counts {
    fn add(&self, tag: u8) {
        let i = match tag {
            b'P' => 0,
            b'B' => 1,
            b'E' => 2,
            b'Q' => 3,
            b'S' => 4,
            b'D' => 5,
            _ => 6,
        };
        self.by_type[i].fetch_add(1, Ordering::SeqCst);
    }

    fn get(&self, i: usize) -> u64 {
        self.by_type[i].load(Ordering::SeqCst)
    }
}

/// A relay on a local port in front of the server a URL names; every connection to it
/// is forwarded to that server, and the messages the client sends are counted. Stops
/// accepting when dropped (open connections run on until either side closes).
pub struct WireCounter {
    listen: SocketAddr,
    authority: String,
    url: String,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl WireCounter {
    /// Starts a relay in front of the server of `url` (`postgresql://[user@]host:port/…`,
    /// TCP, no TLS).
    pub fn start(url: &str) -> io::Result<WireCounter> {
        let authority = authority(url).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no host:port in the URL {url}: give postgresql://user@host:port/db"),
            )
        })?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let listen = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (counts, stop, upstream) = (counts.clone(), stop.clone(), authority.to_string());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(&upstream) else {
                        continue;
                    };
                    relay(client, server, counts.clone());
                }
            })
        };
        Ok(WireCounter {
            listen,
            authority: authority.to_string(),
            url: url.replacen(authority, &listen.to_string(), 1),
            counts,
            stop,
            accept: Some(accept),
        })
    }

    /// The URL to connect through the relay: the given one with its `host:port` replaced.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's `host:port` the relay forwards to.
    pub fn upstream(&self) -> &str {
        &self.authority
    }

    /// The messages sent so far, over every connection.
    pub fn sent(&self) -> Sent {
        let c = &self.counts;
        Sent {
            parse: c.get(0),
            bind: c.get(1),
            execute: c.get(2),
            query: c.get(3),
            sync: c.get(4),
            describe: c.get(5),
            other: c.get(6),
        }
    }
}

impl Drop for WireCounter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(self.listen);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// `host:port` of a `postgresql://` URL.
fn authority(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let hostport = &rest[..end];
    let hostport = hostport.rsplit_once('@').map_or(hostport, |(_, h)| h);
    hostport.contains(':').then_some(hostport)
}

/// Forwards both ways: the server's bytes as they come, the client's message by message,
/// counted.
fn relay(client: TcpStream, server: TcpStream, counts: Arc<Counts>) {
    let (Ok(mut client_r), Ok(mut server_w)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let (mut server_r, mut client_w) = (server, client);
    std::thread::spawn(move || {
        let _ = io::copy(&mut server_r, &mut client_w);
        let _ = client_w.shutdown(Shutdown::Both);
    });
    std::thread::spawn(move || {
        let _ = forward_counted(&mut client_r, &mut server_w, &counts);
        let _ = server_w.shutdown(Shutdown::Both);
    });
}

/// Copies the client's messages to the server: first the untyped startup messages (an
/// `SSLRequest` or `GSSENCRequest` — answered by one byte the server sends — then the
/// startup message), then typed messages, each counted by its type byte.
fn forward_counted(from: &mut TcpStream, to: &mut TcpStream, counts: &Counts) -> io::Result<()> {
    loop {
        let body = untyped(from, to)?;
        // 80877103: SSLRequest, 80877104: GSSENCRequest — the startup message follows.
        if !matches!(body.get(..4), Some([4, 210, 22, 47 | 48])) {
            break;
        }
    }
    loop {
        let mut head = [0u8; 5];
        from.read_exact(&mut head)?;
        counts.add(head[0]);
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len.saturating_sub(4)];
        from.read_exact(&mut body)?;
        to.write_all(&head)?;
        to.write_all(&body)?;
    }
}

/// Forwards one untyped message (length, then body) and returns its body.
fn untyped(from: &mut TcpStream, to: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    from.read_exact(&mut len)?;
    let mut body = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
    from.read_exact(&mut body)?;
    to.write_all(&len)?;
    to.write_all(&body)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::authority;

    #[test]
    fn the_authority_of_a_url() {
        assert_eq!(
            authority("postgresql://postgres@127.0.0.1:55432/postgres"),
            Some("127.0.0.1:55432")
        );
        assert_eq!(
            authority("postgresql://127.0.0.1:5/d?x=1"),
            Some("127.0.0.1:5")
        );
        assert_eq!(authority("postgresql://host/d"), None);
        assert_eq!(authority("no url"), None);
    }
}
