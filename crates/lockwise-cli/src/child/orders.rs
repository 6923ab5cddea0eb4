//! What `lockwise run` tells the supervisor it forked before taking the lock, once the lock is
//! granted: the command, its environment, how to stop it, and the descriptors it must hold.
//!
//! Sent once over a stream socket of the two processes: a header (magic, body length) that
//! carries the descriptors (`SCM_RIGHTS`: the deadline feed's read end, and the file backend's
//! kernel lock when there is one), then the body. The body is length-prefixed fields, so an
//! argument may hold any byte.

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

/// The header's first bytes: this protocol, version 1.
const MAGIC: [u8; 4] = *b"lwo1";
/// The largest body taken: far above any command line (`ARG_MAX` is 2 MiB on Linux).
const MAX_BODY: usize = 16 << 20;

/// The supervisor's orders (see the module's docs).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Orders {
    /// SIGTERM this long before the lease's deadline (and after lockwise's death), SIGKILL
    /// at it.
    pub(crate) kill_after: Duration,
    /// The group is to take the terminal's foreground before the command starts.
    pub(crate) terminal: bool,
    /// The lock dies with lockwise (a database session's): no grace after its death.
    pub(crate) lock_dies_with_parent: bool,
    /// Variables set (`Some`) or removed (`None`) in the command's environment, in order.
    pub(crate) env: Vec<(OsString, Option<OsString>)>,
    /// The command and its arguments (at least the program).
    pub(crate) command: Vec<OsString>,
}

/// Orders as received, with their descriptors.
#[derive(Debug)]
pub(crate) struct Received {
    pub(crate) orders: Orders,
    /// The deadline feed's read end, its first deadline already in it.
    pub(crate) deadline: OwnedFd,
    /// The file backend's kernel lock, to keep until the group is gone.
    pub(crate) held: Option<OwnedFd>,
}

impl Orders {
    /// Sends these orders with `deadline` (and `held`) over `socket`.
    pub(crate) fn send(
        &self,
        socket: &UnixStream,
        deadline: BorrowedFd<'_>,
        held: Option<BorrowedFd<'_>>,
    ) -> io::Result<()> {
        let body = self.encode();
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&n| n as usize <= MAX_BODY)
            .ok_or_else(|| io::Error::other("the command line is too long"))?;
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&MAGIC);
        header[4..].copy_from_slice(&len.to_le_bytes());
        let mut fds = vec![deadline.as_raw_fd()];
        fds.extend(held.map(|fd| fd.as_raw_fd()));
        let cmsg = [ControlMessage::ScmRights(&fds)];
        let sent = sendmsg::<()>(
            socket.as_raw_fd(),
            &[IoSlice::new(&header)],
            &cmsg,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )?;
        // The descriptors went with the first byte; the rest of the header goes as a stream.
        let mut writer = socket;
        writer.write_all(&header[sent..])?;
        writer.write_all(&body)?;
        Ok(())
    }

    /// Waits for orders on `socket`. `Ok(None)` when lockwise closed it without sending any
    /// (it did not get the lock, or it is gone).
    pub(crate) fn receive(socket: &UnixStream) -> io::Result<Option<Received>> {
        let mut header = [0u8; 8];
        let mut space = nix::cmsg_space!([RawFd; 2]);
        let (got, fds) = {
            let mut iov = [IoSliceMut::new(&mut header)];
            let msg = loop {
                match recvmsg::<()>(
                    socket.as_raw_fd(),
                    &mut iov,
                    Some(&mut space),
                    MsgFlags::MSG_CMSG_CLOEXEC,
                ) {
                    Err(nix::errno::Errno::EINTR) => {}
                    other => break other?,
                }
            };
            let mut fds = Vec::new();
            for cmsg in msg.cmsgs()? {
                if let ControlMessageOwned::ScmRights(received) = cmsg {
                    fds.extend(received.into_iter().map(owned));
                }
            }
            (msg.bytes, fds)
        };
        if got == 0 {
            return Ok(None);
        }
        let mut reader = socket;
        reader.read_exact(&mut header[got..])?;
        if header[..4] != MAGIC {
            return Err(invalid("not lockwise's orders"));
        }
        let mut len = [0u8; 4];
        len.copy_from_slice(&header[4..]);
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_BODY {
            return Err(invalid("orders too long"));
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body)?;
        let orders = Orders::decode(&body)?;
        let mut fds = fds.into_iter();
        let deadline = fds.next().ok_or_else(|| invalid("no deadline feed"))?;
        Ok(Some(Received {
            orders,
            deadline,
            held: fds.next(),
        }))
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let nanos = u64::try_from(self.kill_after.as_nanos()).unwrap_or(u64::MAX);
        out.extend_from_slice(&nanos.to_le_bytes());
        out.push(u8::from(self.terminal) | u8::from(self.lock_dies_with_parent) << 1);
        put_len(&mut out, self.env.len());
        for (name, value) in &self.env {
            put_bytes(&mut out, name.as_bytes());
            match value {
                Some(value) => {
                    out.push(1);
                    put_bytes(&mut out, value.as_bytes());
                }
                None => out.push(0),
            }
        }
        put_len(&mut out, self.command.len());
        for arg in &self.command {
            put_bytes(&mut out, arg.as_bytes());
        }
        out
    }

    fn decode(mut body: &[u8]) -> io::Result<Orders> {
        let input = &mut body;
        let kill_after = Duration::from_nanos(u64::from_le_bytes(take_array(input)?));
        let [flags] = take_array(input)?;
        if flags > 0b11 {
            return Err(invalid("unknown flags"));
        }
        let count = take_len(input)?;
        let mut env = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let name = take_os(input)?;
            let value = match take_array(input)? {
                [0] => None,
                [1] => Some(take_os(input)?),
                _ => return Err(invalid("bad environment entry")),
            };
            env.push((name, value));
        }
        let count = take_len(input)?;
        let mut command = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            command.push(take_os(input)?);
        }
        if !input.is_empty() {
            return Err(invalid("trailing bytes"));
        }
        if command.is_empty() {
            return Err(invalid("no command"));
        }
        Ok(Orders {
            kill_after,
            terminal: flags & 1 != 0,
            lock_dies_with_parent: flags & 2 != 0,
            env,
            command,
        })
    }
}

#[allow(unsafe_code)]
fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was installed in this process by the kernel for the message just received
    // (SCM_RIGHTS), and nothing else in this process knows its number.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("orders: {what}"))
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    // A body over `MAX_BODY` is refused by `send`, so every length fits.
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn take_array<const N: usize>(input: &mut &[u8]) -> io::Result<[u8; N]> {
    let (head, rest) = input
        .split_first_chunk::<N>()
        .ok_or_else(|| invalid("truncated"))?;
    *input = rest;
    Ok(*head)
}

fn take_len(input: &mut &[u8]) -> io::Result<usize> {
    let len = u32::from_le_bytes(take_array(input)?) as usize;
    // Every entry takes at least four bytes: a count beyond that is a lie, not a reason to
    // allocate.
    if len > input.len() {
        return Err(invalid("truncated"));
    }
    Ok(len)
}

fn take_os(input: &mut &[u8]) -> io::Result<OsString> {
    let len = take_len(input)?;
    let (bytes, rest) = input.split_at(len);
    *input = rest;
    Ok(OsString::from_vec(bytes.to_vec()))
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    fn orders() -> Orders {
        Orders {
            kill_after: Duration::from_millis(1500),
            terminal: true,
            lock_dies_with_parent: false,
            env: vec![
                ("LOCKWISE_FENCING_TOKEN".into(), Some("42".into())),
                ("LOCKWISE_URL".into(), None),
                ("EMPTY".into(), Some("".into())),
            ],
            command: vec![
                "sh".into(),
                "-c".into(),
                OsString::from_vec(b"echo \xff\n\0x".to_vec()),
                "".into(),
            ],
        }
    }

    #[test]
    fn orders_and_descriptors_arrive_whole() {
        let (a, b) = UnixStream::pair().unwrap();
        let (read, write) = nix::unistd::pipe().unwrap();
        let file = tempfile::tempfile().unwrap();
        let sent = orders();
        sent.send(&a, read.as_fd(), Some(file.as_fd())).unwrap();
        let got = Orders::receive(&b).unwrap().unwrap();
        assert_eq!(got.orders, sent);
        // The descriptors are the same open files, close-on-exec here.
        nix::unistd::write(&write, b"x").unwrap();
        let mut byte = [0u8; 1];
        std::fs::File::from(got.deadline)
            .read_exact(&mut byte)
            .unwrap();
        assert_eq!(&byte, b"x");
        let held = got.held.unwrap();
        let flags = nix::fcntl::fcntl(&held, nix::fcntl::FcntlArg::F_GETFD).unwrap();
        assert!(
            nix::fcntl::FdFlag::from_bits_retain(flags).contains(nix::fcntl::FdFlag::FD_CLOEXEC)
        );
        let ino = |fd: BorrowedFd<'_>| nix::sys::stat::fstat(fd).unwrap().st_ino;
        assert_eq!(ino(held.as_fd()), ino(file.as_fd()));
    }

    #[test]
    fn a_closed_socket_is_no_orders() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(a);
        assert!(Orders::receive(&b).unwrap().is_none());
    }

    #[test]
    fn damaged_orders_are_refused_not_obeyed() {
        let body = orders().encode();
        // Every truncation, and every trailing byte, is an error.
        for cut in 0..body.len() {
            assert!(Orders::decode(&body[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(Orders::decode(&longer).is_err());
        // A count that promises more than the body holds allocates nothing and fails.
        let mut lying = body[..9].to_vec();
        lying.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(Orders::decode(&lying).is_err());
        // No command, or unknown flags.
        let mut empty = orders();
        empty.command.clear();
        assert!(Orders::decode(&empty.encode()).is_err());
        let mut flags = body.clone();
        flags[8] = 4;
        assert!(Orders::decode(&flags).is_err());
        // Not the magic, and no descriptor.
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(b"nope\0\0\0\0").unwrap();
        assert!(Orders::receive(&b).is_err());
        let (a, b) = UnixStream::pair().unwrap();
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&u32::try_from(body.len()).unwrap().to_le_bytes());
        (&a).write_all(&header).unwrap();
        (&a).write_all(&body).unwrap();
        assert!(Orders::receive(&b).is_err());
    }
}
