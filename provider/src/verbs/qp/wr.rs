//! Typed send work requests: [`SendRequest`], its [`Opcode`] and UD destination [`UdDest`].

use super::*;

/// The operation of a [`SendRequest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// SEND: consumes a receive on the peer.
    Send,
    /// SEND with 32-bit immediate data.
    SendWithImm(u32),
    /// RDMA WRITE of the local data to `remote`.
    Write(RemoteSlice),
    /// RDMA WRITE with immediate data (consumes a receive on the peer).
    WriteWithImm(RemoteSlice, u32),
    /// RDMA READ of `remote` into the local buffers.
    Read(RemoteSlice),
    /// 64-bit compare-and-swap at `remote`; the old value lands in the 8-byte local buffer.
    CompareSwap {
        /// 8 bytes, 8-byte aligned.
        remote: RemoteSlice,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// 64-bit fetch-and-add at `remote`; the old value lands in the 8-byte local buffer.
    FetchAdd {
        /// 8 bytes, 8-byte aligned.
        remote: RemoteSlice,
        /// Addend.
        add: u64,
    },
    /// IBA 1.5 RDMA FLUSH (RC, kernel rxe >= 6.2): makes the peer's earlier writes to
    /// `remote` visible (placement type [`FLUSH_GLOBAL`]) or persistent ([`FLUSH_PERSISTENT`],
    /// which no region of this device allows), for the range or, with level [`FLUSH_MR`], the
    /// whole region. No local buffers; completes with `WcOpcode::Flush`. The peer's QP and
    /// region need `AccessFlags::FLUSH_GLOBAL`.
    Flush {
        /// The range (`len` goes in the RETH).
        remote: RemoteSlice,
        /// [`FLUSH_GLOBAL`] and/or [`FLUSH_PERSISTENT`].
        placement_type: u8,
        /// [`FLUSH_RANGE`] or [`FLUSH_MR`].
        level: u8,
    },
    /// IBA 1.5 ATOMIC WRITE (RC, kernel rxe >= 6.2): stores `value` (host order, as the peer
    /// reads a `u64`) at `remote` as one 8-byte store. No local buffers; completes with
    /// `WcOpcode::AtomicWrite`. The peer's QP and region need `AccessFlags::REMOTE_WRITE`.
    AtomicWrite {
        /// 8 bytes, 8-byte aligned.
        remote: RemoteSlice,
        /// The value stored.
        value: u64,
    },
    /// SEND that also invalidates the peer's memory window with this rkey (type 2).
    SendWithInv(u32),
    /// Invalidates a type 2 memory window of this QP's PD (a local operation, no packet).
    LocalInv(u32),
    /// Binds the window with rkey `mw_rkey` to the one local slice of the request, with
    /// `access`; the window's rkey becomes `rkey` (only its key byte is the program's).
    /// [`QueuePair::bind_mw`](super::QueuePair::bind_mw) builds it.
    BindMw {
        /// The window's current rkey.
        mw_rkey: u32,
        /// Its rkey after the bind.
        rkey: u32,
        /// Remote access the window grants.
        access: roce_emu::AccessFlags,
    },
}

impl Opcode {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Opcode::Send => "SEND",
            Opcode::SendWithImm(_) => "SEND with immediate",
            Opcode::Write(_) => "RDMA WRITE",
            Opcode::WriteWithImm(..) => "RDMA WRITE with immediate",
            Opcode::Read(_) => "RDMA READ",
            Opcode::CompareSwap { .. } => "atomic compare-and-swap",
            Opcode::FetchAdd { .. } => "atomic fetch-and-add",
            Opcode::Flush { .. } => "RDMA FLUSH",
            Opcode::AtomicWrite { .. } => "ATOMIC WRITE",
            Opcode::SendWithInv(_) => "SEND with invalidate",
            Opcode::LocalInv(_) => "local invalidate",
            Opcode::BindMw { .. } => "bind memory window",
        }
    }
}

/// [`Opcode::Flush`] placement type: global visibility (`IBV_FLUSH_GLOBAL`).
pub const FLUSH_GLOBAL: u8 = 1;
/// [`Opcode::Flush`] placement type: persistence (`IBV_FLUSH_PERSISTENT`).
pub const FLUSH_PERSISTENT: u8 = 2;
/// [`Opcode::Flush`] selectivity level: the range given (`IBV_FLUSH_RANGE`).
pub const FLUSH_RANGE: u8 = 0;
/// [`Opcode::Flush`] selectivity level: the whole region behind the rkey (`IBV_FLUSH_MR`).
pub const FLUSH_MR: u8 = 1;

/// Where a UD send goes.
#[derive(Clone, Copy, Debug)]
pub struct UdDest<'a> {
    /// The destination device.
    pub ah: &'a AddressHandle,
    /// The destination QP.
    pub remote_qpn: u32,
    /// Its Q_Key.
    pub remote_qkey: u32,
}

/// A typed send work request (`struct ibv_send_wr`).
///
/// ```
/// # use roce_provider::verbs::{SendRequest, RemoteSlice, Opcode};
/// let remote = RemoteSlice { addr: 0x1000, rkey: 0x42, len: 4096 };
/// let wr = SendRequest::write(7, &[], remote).unsignaled();
/// assert_eq!(wr.op, Opcode::Write(remote));
/// assert!(!wr.signaled);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SendRequest<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Gather list (READ / atomics: where the result lands).
    pub local: &'a [LocalSlice<'a>],
    /// The operation.
    pub op: Opcode,
    /// Generate a completion (default true).
    pub signaled: bool,
    /// Ask the peer's CQ to raise a solicited event.
    pub solicited: bool,
    /// Wait for earlier READs/atomics first.
    pub fence: bool,
    /// Inline payload copied at post time instead of `local` (SEND/WRITE only).
    pub inline: Option<&'a [u8]>,
    /// UD destination.
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendRequest<'a> {
    fn new(wr_id: u64, local: &'a [LocalSlice<'a>], op: Opcode) -> Self {
        SendRequest {
            wr_id,
            local,
            op,
            signaled: true,
            solicited: false,
            fence: false,
            inline: None,
            ud: None,
        }
    }
    /// SEND of `local`.
    pub fn send(wr_id: u64, local: &'a [LocalSlice<'a>]) -> Self {
        Self::new(wr_id, local, Opcode::Send)
    }
    /// SEND with immediate data.
    pub fn send_with_imm(wr_id: u64, local: &'a [LocalSlice<'a>], imm: u32) -> Self {
        Self::new(wr_id, local, Opcode::SendWithImm(imm))
    }
    /// SEND of `data` copied inline at post time (at most the QP's `max_inline_data`).
    pub fn send_inline(wr_id: u64, data: &'a [u8]) -> Self {
        SendRequest {
            inline: Some(data),
            ..Self::new(wr_id, &[], Opcode::Send)
        }
    }
    /// RDMA WRITE of `local` to `remote`.
    pub fn write(wr_id: u64, local: &'a [LocalSlice<'a>], remote: RemoteSlice) -> Self {
        Self::new(wr_id, local, Opcode::Write(remote))
    }
    /// RDMA WRITE with immediate data.
    pub fn write_with_imm(
        wr_id: u64,
        local: &'a [LocalSlice<'a>],
        remote: RemoteSlice,
        imm: u32,
    ) -> Self {
        Self::new(wr_id, local, Opcode::WriteWithImm(remote, imm))
    }
    /// RDMA READ of `remote` into `local`.
    pub fn read(wr_id: u64, local: &'a [LocalSlice<'a>], remote: RemoteSlice) -> Self {
        Self::new(wr_id, local, Opcode::Read(remote))
    }
    /// Atomic compare-and-swap; the old value lands in `local` (8 bytes).
    pub fn compare_swap(
        wr_id: u64,
        local: &'a [LocalSlice<'a>],
        remote: RemoteSlice,
        compare: u64,
        swap: u64,
    ) -> Self {
        Self::new(
            wr_id,
            local,
            Opcode::CompareSwap {
                remote,
                compare,
                swap,
            },
        )
    }
    /// Atomic fetch-and-add; the old value lands in `local` (8 bytes).
    pub fn fetch_add(
        wr_id: u64,
        local: &'a [LocalSlice<'a>],
        remote: RemoteSlice,
        add: u64,
    ) -> Self {
        Self::new(wr_id, local, Opcode::FetchAdd { remote, add })
    }
    /// RDMA FLUSH of `remote` ([`Opcode::Flush`]).
    pub fn flush(wr_id: u64, remote: RemoteSlice, placement_type: u8, level: u8) -> Self {
        Self::new(
            wr_id,
            &[],
            Opcode::Flush {
                remote,
                placement_type,
                level,
            },
        )
    }
    /// ATOMIC WRITE of `value` to the 8 bytes at `remote` ([`Opcode::AtomicWrite`]).
    pub fn atomic_write(wr_id: u64, remote: RemoteSlice, value: u64) -> Self {
        Self::new(wr_id, &[], Opcode::AtomicWrite { remote, value })
    }
    /// No completion on success (errors still complete).
    pub fn unsignaled(mut self) -> Self {
        self.signaled = false;
        self
    }
    /// Solicited event at the peer.
    pub fn solicited(mut self) -> Self {
        self.solicited = true;
        self
    }
    /// Fence behind earlier READs/atomics.
    pub fn fence(mut self) -> Self {
        self.fence = true;
        self
    }
    /// Copy the local data inline at post time (small SEND/WRITE).
    pub fn inline_data(mut self, data: &'a [u8]) -> Self {
        self.inline = Some(data);
        self
    }
    /// UD: send to `remote_qpn` (Q_Key `remote_qkey`) on the device `ah` points at.
    pub fn to(mut self, ah: &'a AddressHandle, remote_qpn: u32, remote_qkey: u32) -> Self {
        self.ud = Some(UdDest {
            ah,
            remote_qpn,
            remote_qkey,
        });
        self
    }
}
