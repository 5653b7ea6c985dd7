//! Shared pieces of the NIC fuzz targets: a bounds-asserting memory region, packet crafting
//! with valid ICRCs, and draining a NIC's output.
use arbitrary::Unstructured;
use roce_emu::{MemoryRegion, Nic, RxMeta, Transmit, VecMemory};
use roce_wire::transport::{Packet, Repr};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

/// A [`MemoryRegion`] that panics on any call outside `[0, len)` (or a misaligned atomic):
/// the engine promises never to make one, whatever arrives on the wire.
pub struct Guarded {
    inner: VecMemory,
    /// Calls that reached the memory.
    pub touched: AtomicU64,
}

impl Guarded {
    /// `len` bytes filled with `fill`.
    pub fn new(len: usize, fill: u8) -> Guarded {
        Guarded {
            inner: VecMemory::from_vec(vec![fill; len]),
            touched: AtomicU64::new(0),
        }
    }
    /// A copy of the contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.inner.to_vec()
    }
    /// Application-side store.
    pub fn store(&self, off: usize, b: &[u8]) {
        self.inner.store(off, b)
    }
    fn check(&self, what: &str, off: usize, len: usize) {
        let end = off.checked_add(len);
        assert!(
            end.is_some_and(|e| e <= self.inner.len()),
            "stray memory access: {what} at {off}+{len} of a {}-byte region",
            self.inner.len()
        );
        self.touched.fetch_add(1, Ordering::Relaxed);
    }
}

impl MemoryRegion for Guarded {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.check("read", off, dst.len());
        self.inner.read(off, dst)
    }
    fn write(&self, off: usize, src: &[u8]) {
        self.check("write", off, src.len());
        self.inner.write(off, src)
    }
    fn atomic_cmp_swap(&self, off: usize, cmp: u64, swap: u64) -> u64 {
        self.check("cmp_swap", off, 8);
        assert!(off & 7 == 0, "misaligned atomic at {off}");
        self.inner.atomic_cmp_swap(off, cmp, swap)
    }
    fn atomic_fetch_add(&self, off: usize, add: u64) -> u64 {
        self.check("fetch_add", off, 8);
        assert!(off & 7 == 0, "misaligned atomic at {off}");
        self.inner.atomic_fetch_add(off, add)
    }
}

/// The receive metadata of a datagram `src → dst` (IPv4 ID 0, as our peers send).
pub fn meta(src: IpAddr, dst: IpAddr, sport: u16) -> RxMeta {
    RxMeta {
        src_ip: src,
        dst_ip: dst,
        src_port: sport,
        ipv4_id: Some(0),
        tos: 0,
        ttl: 64,
        flow_label: 0,
    }
}

/// Computes the ICRC of `buf` (BTH..ICRC) as sent `src → dst` from `sport`.
pub fn seal(src: IpAddr, dst: IpAddr, sport: u16, buf: &mut [u8]) {
    let t = Transmit {
        src_ip: src,
        dst_ip: dst,
        src_port: sport,
        dst_port: 4791,
        tos: 0,
        ttl: 64,
        flow_label: 0,
        ipv4_id: 0,
        len: buf.len(),
    };
    assert!(roce_emu::net::seal(&t, buf));
}

/// Emits `r` with a payload of `r.payload_len` bytes of `fill` into `buf` (resized); returns
/// the length.
pub fn emit(r: &Repr, fill: u8, buf: &mut Vec<u8>) -> usize {
    let len = r.buffer_len();
    buf.clear();
    buf.resize(len, 0);
    r.emit(&mut Packet::new_unchecked(&mut buf[..]));
    let h = r.header_len();
    for (i, b) in buf[h..h + r.payload_len].iter_mut().enumerate() {
        *b = fill.wrapping_add(i as u8);
    }
    len
}

/// One transmitted datagram, parsed.
pub struct Out {
    /// Where it went.
    pub t: Transmit,
    /// Its headers.
    pub repr: Repr,
    /// Its bytes (BTH..ICRC).
    pub bytes: Vec<u8>,
}

/// Drains `nic`'s output at `now`; every datagram must parse (the NIC never sends garbage).
/// At most `limit` datagrams are taken (the rest stay queued).
pub fn drain(nic: &mut Nic, now: roce_emu::Instant, buf: &mut [u8], limit: usize) -> Vec<Out> {
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(t) = nic.poll_transmit(now, buf) else {
            break;
        };
        let bytes = buf[..t.len].to_vec();
        let p = Packet::new_checked(&bytes[..]).expect("the NIC sent a truncated packet");
        let repr = Repr::parse(&p).expect("the NIC sent an unparsable packet");
        out.push(Out { t, repr, bytes });
    }
    out
}

/// `u.choose` over a small table, defaulting to the first entry when the input runs out.
pub fn pick<T: Copy>(u: &mut Unstructured<'_>, table: &[T]) -> T {
    u.choose(table).copied().unwrap_or(table[0])
}

/// An integer in `lo..=hi`, `lo` when the input runs out.
pub fn range(u: &mut Unstructured<'_>, lo: u32, hi: u32) -> u32 {
    u.int_in_range(lo..=hi).unwrap_or(lo)
}

/// An arbitrary value, the default when the input runs out.
pub fn any<'a, T: arbitrary::Arbitrary<'a> + Default>(u: &mut Unstructured<'a>) -> T {
    u.arbitrary().unwrap_or_default()
}

/// True with probability `num/den` (false when the input runs out).
pub fn chance(u: &mut Unstructured<'_>, num: u8, den: u8) -> bool {
    u.ratio(num, den).unwrap_or(false)
}
