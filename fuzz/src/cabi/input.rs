//! The input format: a little-endian field stream ([`Input`], [`Field`]), handle choices
//! ([`Ref`]), bounded lists and the records (SGEs, WRs, address vectors) ops are made of.

/// The fuzz input as a stream of fields: little endian, zero once it runs out.
pub struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    /// Reads `data` from the start.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data, at: 0 }
    }
    /// True once every byte was read.
    pub fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }
    pub(super) fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at = self.at.saturating_add(1);
        b
    }
}

/// A value read from / written to the input.
pub trait Field: Sized {
    /// Reads one.
    fn get(i: &mut Input<'_>) -> Self;
    /// Writes it so that [`Field::get`] reads it back.
    fn put(&self, out: &mut Vec<u8>);
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn get(i: &mut Input<'_>) -> Self {
                let mut b = [0u8; core::mem::size_of::<$t>()];
                for x in b.iter_mut() {
                    *x = i.byte();
                }
                <$t>::from_le_bytes(b)
            }
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes())
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64);

impl Field for bool {
    fn get(i: &mut Input<'_>) -> Self {
        i.byte() & 1 == 1
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.push(*self as u8)
    }
}

/// A handle choice: `0..=0xEF` picks a live object (index modulo the number of live ones, in
/// creation order), `0xF0..=0xF7` a destroyed one, `0xF8..=0xFE` a live object of another
/// type, `0xFF` NULL. The library promises `EINVAL` for the last three (it looks every pointer
/// up in its registry of live objects before using it). An op whose choice cannot be met
/// (nothing live, nothing destroyed) does nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Ref(pub u8);

impl Ref {
    /// NULL.
    pub const NULL: Ref = Ref(0xFF);
    /// The `k`-th live object.
    pub const fn live(k: u8) -> Ref {
        Ref(k)
    }
    /// A destroyed object (`k` modulo the number of them).
    pub const fn dead(k: u8) -> Ref {
        Ref(0xF0 + k % 8)
    }
    /// A live object of another type (`k` modulo the number of them).
    pub const fn wrong(k: u8) -> Ref {
        Ref(0xF8 + k % 7)
    }
}

impl Field for Ref {
    fn get(i: &mut Input<'_>) -> Self {
        Ref(i.byte())
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.push(self.0)
    }
}

/// Up to `N` items (a count byte modulo `N + 1`, then the items).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct List<T, const N: usize>(pub Vec<T>);

impl<T: Field, const N: usize> Field for List<T, N> {
    fn get(i: &mut Input<'_>) -> Self {
        let n = i.byte() as usize % (N + 1);
        List((0..n).map(|_| T::get(i)).collect())
    }
    fn put(&self, out: &mut Vec<u8>) {
        assert!(self.0.len() <= N, "list longer than {N}");
        out.push(self.0.len() as u8);
        for x in &self.0 {
            x.put(out);
        }
    }
}

macro_rules! record {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Default)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        impl Field for $name {
            fn get(i: &mut Input<'_>) -> Self {
                $name { $($f: Field::get(i)),* }
            }
            fn put(&self, out: &mut Vec<u8>) {
                $(self.$f.put(out);)*
            }
        }
    };
}

record!(
    /// One SGE. `mr` names any MR ever registered (live or not: only its numbers are used;
    /// NULL: made-up numbers). `mode % 8`: 0–4 inside the MR, 5 from its iova plus `off`
    /// unclipped, 6 a wrong lkey, 7 its rkey as lkey. With `IBV_SEND_INLINE` the address is a
    /// real pointer into the MR's buffer (the library reads it), whatever the mode.
    Sge {
        mr: Ref,
        off: u16,
        len: u16,
        mode: u8,
    }
);

record!(
    /// The remote side of an RDMA / atomic WR. `mode % 4`: 0 inside the MR (8-aligned), 1 inside,
    /// 2 unclipped offset, 3 wrong rkey.
    Remote {
        mr: Ref,
        off: u16,
        mode: u8,
    }
);

record!(
    /// One `ibv_send_wr`. `opcode`: below 0xE0 one of the nine verbs opcodes, else raw
    /// `opcode - 0xE0`. `flags`: raw `IBV_SEND_*` bits. `sge_mode % 16`: 15 `num_sge = -1`,
    /// 14 NULL `sg_list` with `num_sge = 2`, 13 forty zero-length SGEs, else `sges`.
    SendSpec {
        opcode: u8,
        flags: u8,
        sges: List<Sge, 5>,
        sge_mode: u8,
        remote: Remote,
        imm: u32,
        compare_add: u64,
        swap: u64,
        /// UD: the address handle.
        ah: Ref,
        /// UD: below 0xC0 the QP number of that QP (any, live or not), else made up.
        dest: Ref,
        /// UD: 0 = the Q_Key the connect op gives UD QPs.
        qkey: u32,
    }
);

record!(
    /// One `ibv_recv_wr` (`sge_mode` as in [`SendSpec`]).
    RecvSpec {
        sges: List<Sge, 5>,
        sge_mode: u8,
    }
);

record!(
    /// An address vector (`ibv_ah_attr`). `gid % 4`: 0–1 this device's IPv4 GID, 2 an IPv4
    /// loopback address nobody listens on, 3 an IPv6 GID (always paired with the IPv4 source
    /// GID, so it is refused: nothing is ever sent outside 127/8). `sgid % 8`: 0–5 index 1
    /// (IPv4), 6 index 0 (link-local, refused), 7 `sgid` itself (an empty entry past 1:
    /// ENODATA). `is_global` 0 or `port` ≥ 0x80 (port `port`, else 1): refused with EINVAL, as
    /// the kernel's `rdma_check_ah_attr`.
    AhSpec {
        gid: u8,
        sgid: u8,
        is_global: u8,
        port: u8,
        hop: u8,
        tclass: u8,
        flow: u32,
        sl: u8,
    }
);
