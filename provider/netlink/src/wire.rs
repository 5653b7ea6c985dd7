//! Netlink framing: message headers (`struct nlmsghdr`) and attributes (`struct nlattr`), as
//! the kernel lays them out (native byte order, 4-byte alignment).

/// `NLMSG_HDRLEN`: length, type, flags, sequence number, port id.
pub const HDR_LEN: usize = 16;
/// `NLMSG_ERROR`: an error or, with error 0, an acknowledgement.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// `NLMSG_MIN_TYPE`: types below are control messages.
pub const NLMSG_MIN_TYPE: u16 = 0x10;
/// `NLM_F_REQUEST`.
pub const F_REQUEST: u16 = 0x1;
/// `NLM_F_MULTI`: part of a multipart answer (a dump), ended by `NLMSG_DONE`.
pub const F_MULTI: u16 = 0x2;
/// `NLM_F_ACK`: the sender wants an acknowledgement.
pub const F_ACK: u16 = 0x4;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
pub const F_DUMP: u16 = 0x300;
/// `NLM_F_CAPPED` on `NLMSG_ERROR`: only the request's header is echoed.
pub const F_CAPPED: u16 = 0x100;
/// `NLM_F_ACK_TLVS` on `NLMSG_ERROR`: extended-ack attributes follow.
pub const F_ACK_TLVS: u16 = 0x200;
/// `NLMSGERR_ATTR_MSG`: the extended ack's message string.
pub const NLMSGERR_ATTR_MSG: u16 = 1;
/// `NLA_TYPE_MASK`: the attribute type without the NESTED / NET_BYTEORDER bits.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// `NLMSG_ALIGN` / `NLA_ALIGN`.
pub fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// A message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Length of the whole message, header included (`nlmsg_len`).
    pub len: u32,
    /// `nlmsg_type`.
    pub kind: u16,
    /// `nlmsg_flags`.
    pub flags: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// `nlmsg_pid`.
    pub pid: u32,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Header {
    /// The header at the start of `b`, if `b` holds one.
    pub fn parse(b: &[u8]) -> Option<Header> {
        if b.len() < HDR_LEN {
            return None;
        }
        Some(Header {
            len: u32_at(b, 0),
            kind: u16_at(b, 4),
            flags: u16_at(b, 6),
            seq: u32_at(b, 8),
            pid: u32_at(b, 12),
        })
    }

    /// Appends the 16 header bytes.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.len.to_ne_bytes());
        out.extend_from_slice(&self.kind.to_ne_bytes());
        out.extend_from_slice(&self.flags.to_ne_bytes());
        out.extend_from_slice(&self.seq.to_ne_bytes());
        out.extend_from_slice(&self.pid.to_ne_bytes());
    }
}

/// The messages of one datagram: `(header, whole message, payload)`. Stops at the first
/// message whose length is shorter than a header or runs past the buffer (as the kernel's
/// `netlink_rcv_skb` does).
pub fn messages(mut buf: &[u8]) -> impl Iterator<Item = (Header, &[u8], &[u8])> {
    std::iter::from_fn(move || {
        let h = Header::parse(buf)?;
        let len = h.len as usize;
        if len < HDR_LEN || len > buf.len() {
            return None;
        }
        let (msg, rest) = (&buf[..len], &buf[align(len).min(buf.len())..]);
        buf = rest;
        Some((h, msg, &msg[HDR_LEN..]))
    })
}

/// The attributes of a payload: `(type without flag bits, data)`. Stops at a malformed one.
pub fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = u16_at(b, 0) as usize;
        if len < 4 || len > b.len() {
            return None;
        }
        let kind = u16_at(b, 2) & NLA_TYPE_MASK;
        let data = &b[4..len];
        b = &b[align(len).min(b.len())..];
        Some((kind, data))
    })
}

/// The value of the first `u32` attribute of type `kind` in `payload`.
pub fn attr_u32(payload: &[u8], kind: u16) -> Option<u32> {
    attrs(payload)
        .find(|(k, _)| *k == kind)
        .and_then(|(_, d)| (d.len() >= 4).then(|| u32_at(d, 0)))
}

/// Builds one message in a datagram buffer: header first, attributes appended, the length
/// set by [`Msg::end`].
pub struct Msg<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> Msg<'a> {
    /// Starts a message of `kind` with `flags`, answering sequence number `seq` to port `pid`.
    pub fn begin(out: &'a mut Vec<u8>, kind: u16, flags: u16, seq: u32, pid: u32) -> Msg<'a> {
        let start = out.len();
        Header {
            len: 0,
            kind,
            flags,
            seq,
            pid,
        }
        .emit(out);
        Msg { out, start }
    }

    /// Appends raw payload bytes (padded to 4).
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.out.extend_from_slice(b);
        self.pad();
        self
    }

    fn pad(&mut self) {
        let n = align(self.out.len() - self.start) - (self.out.len() - self.start);
        self.out.extend(std::iter::repeat_n(0u8, n));
    }

    /// An attribute with `data` (`nla_put`).
    pub fn attr(&mut self, kind: u16, data: &[u8]) -> &mut Self {
        let len = (4 + data.len()) as u16;
        self.out.extend_from_slice(&len.to_ne_bytes());
        self.out.extend_from_slice(&kind.to_ne_bytes());
        self.out.extend_from_slice(data);
        self.pad();
        self
    }

    /// `nla_put_u8`.
    pub fn u8(&mut self, kind: u16, v: u8) -> &mut Self {
        self.attr(kind, &[v])
    }

    /// `nla_put_u32`.
    pub fn u32(&mut self, kind: u16, v: u32) -> &mut Self {
        self.attr(kind, &v.to_ne_bytes())
    }

    /// `nla_put_u64_64bit` (no pad attribute: x86-64 and arm64 need none).
    pub fn u64(&mut self, kind: u16, v: u64) -> &mut Self {
        self.attr(kind, &v.to_ne_bytes())
    }

    /// `nla_put_string`: the string and its NUL.
    pub fn str(&mut self, kind: u16, s: &str) -> &mut Self {
        let mut d = Vec::with_capacity(s.len() + 1);
        d.extend_from_slice(s.as_bytes());
        d.push(0);
        self.attr(kind, &d)
    }

    /// Sets the header's length (`nlmsg_end`).
    pub fn end(&mut self) {
        let len = (self.out.len() - self.start) as u32;
        self.out[self.start..self.start + 4].copy_from_slice(&len.to_ne_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_message_parses_back_with_its_attributes() {
        let mut out = Vec::new();
        let mut m = Msg::begin(&mut out, 0x1401, F_MULTI, 77, 1234);
        m.u32(1, 0)
            .str(2, "rxe0")
            .u8(14, 1)
            .u64(6, 0x5054_00ff_fe18_0002);
        m.end();
        // 16 + 8 (u32) + 12 ("rxe0\0" padded) + 8 (u8 padded) + 12 (u64)
        assert_eq!(out.len(), 56);
        let all: Vec<_> = messages(&out).collect();
        assert_eq!(all.len(), 1);
        let (h, msg, payload) = all[0];
        assert_eq!(
            h,
            Header {
                len: 56,
                kind: 0x1401,
                flags: F_MULTI,
                seq: 77,
                pid: 1234
            }
        );
        assert_eq!(msg.len(), 56);
        let a: Vec<_> = attrs(payload).collect();
        assert_eq!(a.len(), 4);
        assert_eq!(a[1], (2, &b"rxe0\0"[..]));
        assert_eq!(a[2], (14, &[1u8][..]));
        assert_eq!(a[3].1, &0x5054_00ff_fe18_0002u64.to_ne_bytes()[..]);
        assert_eq!(attr_u32(payload, 1), Some(0));
        assert_eq!(attr_u32(payload, 3), None);
    }

    #[test]
    fn several_messages_in_one_datagram_are_all_read() {
        let mut out = Vec::new();
        Msg::begin(&mut out, 0x1401, F_REQUEST, 1, 0).u8(9, 1).end();
        Msg::begin(&mut out, NLMSG_DONE, F_MULTI, 1, 0)
            .raw(&0i32.to_ne_bytes())
            .end();
        let k: Vec<u16> = messages(&out).map(|(h, _, _)| h.kind).collect();
        assert_eq!(k, [0x1401, NLMSG_DONE]);
    }

    #[test]
    fn truncated_or_malformed_input_stops_the_walk_without_panicking() {
        let mut out = Vec::new();
        Msg::begin(&mut out, 0x1401, F_REQUEST, 1, 0)
            .u32(1, 5)
            .end();
        for cut in 0..out.len() {
            assert_eq!(messages(&out[..cut]).count(), 0, "cut at {cut}");
        }
        // a length shorter than the header, and one past the end
        let mut bad = out.clone();
        bad[..4].copy_from_slice(&8u32.to_ne_bytes());
        assert_eq!(messages(&bad).count(), 0);
        bad[..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(messages(&bad).count(), 0);
        // an attribute whose length runs past the payload, or is below 4
        assert_eq!(attrs(&[200, 0, 1, 0, 0, 0]).count(), 0);
        assert_eq!(attrs(&[2, 0, 1, 0]).count(), 0);
        assert_eq!(attr_u32(&[6, 0, 1, 0, 7, 0, 0, 0], 1), None);
    }
}
