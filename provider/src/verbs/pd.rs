//! Protection domains and address handles.
use super::cq::CompletionQueue;
use super::device::{Context, CtxInner};
use super::error::{Error, Result};
use super::mr::{DmaBuf, MemoryRegion};
use super::qp::{QueuePairBuilder, QueuePairEndpoint};
use super::srq::SrqBuilder;
use roce_emu::{AccessFlags, AhAttr, Gid, QpType};
use std::net::IpAddr;
use std::sync::Arc;

/// A protection domain (`struct ibv_pd`). Cheap to clone; regions, QPs, SRQs and AHs keep it
/// alive, so it is deallocated after the last of them.
#[derive(Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

pub(crate) struct PdInner {
    pub(crate) ctx: Arc<CtxInner>,
    pub(crate) pd: roce_emu::Pd,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        let pd = self.pd;
        let _ = self.ctx.nic(|n| n.dealloc_pd(pd));
    }
}

impl ProtectionDomain {
    pub(crate) fn new(ctx: &Context) -> Result<ProtectionDomain> {
        let pd = ctx.inner.nic(|n| n.alloc_pd()).map_err(Error::AllocPd)?;
        Ok(ProtectionDomain {
            inner: Arc::new(PdInner {
                ctx: ctx.inner.clone(),
                pd,
            }),
        })
    }

    /// The context.
    pub fn context(&self) -> Context {
        Context {
            inner: self.inner.ctx.clone(),
        }
    }

    /// Registers a Rust-owned buffer (`Vec<u8>` or `Box<[u8]>`); the region owns it from now on.
    /// Remote write or atomic access needs `LOCAL_WRITE` too (IBA), or this fails.
    pub fn register(&self, buf: impl Into<Vec<u8>>, access: AccessFlags) -> Result<MemoryRegion> {
        MemoryRegion::register(&self.inner, DmaBuf::from_vec(buf.into()), access)
    }

    /// Allocates and registers `len` zero bytes, 64-byte aligned ([`super::mr::ALLOC_ALIGN`]).
    pub fn allocate(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        MemoryRegion::register(&self.inner, DmaBuf::zeroed(len), access)
    }

    /// A memory window (`ibv_alloc_mw`) of type 1 or 2, for regions of this PD registered with
    /// `AccessFlags::MW_BIND` ([`super::QueuePair::bind_mw`]).
    pub fn alloc_mw(&self, ty: roce_emu::MwType) -> Result<super::MemoryWindow> {
        super::MemoryWindow::alloc(&self.inner, ty)
    }

    /// A queue pair builder (`ibv_create_qp`) with `send_cq` and `recv_cq` (may be the same).
    pub fn create_qp<'a>(
        &'a self,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
        qp_type: QpType,
    ) -> QueuePairBuilder<'a> {
        QueuePairBuilder::new(self, send_cq, recv_cq, qp_type)
    }

    /// A shared receive queue builder (`ibv_create_srq`) with room for `max_wr` receives.
    pub fn create_srq(&self, max_wr: u32) -> SrqBuilder<'_> {
        SrqBuilder::new(self, max_wr)
    }

    /// An address handle (`ibv_create_ah`) toward the device with GID `gid` (for UD sends).
    pub fn create_ah(&self, gid: Gid) -> Result<AddressHandle> {
        let attr = AhAttr {
            dgid: gid,
            ..AhAttr::to_ip(roce_emu::ip_from_gid(&gid))
        };
        self.create_ah_with(attr)
    }

    /// An address handle toward the device at `ip`.
    pub fn create_ah_to_ip(&self, ip: IpAddr) -> Result<AddressHandle> {
        self.create_ah_with(AhAttr::to_ip(ip))
    }

    /// An address handle toward a peer's endpoint (its GID).
    pub fn create_ah_to(&self, remote: &QueuePairEndpoint) -> Result<AddressHandle> {
        self.create_ah(remote.gid)
    }

    /// An address handle back to the sender of a UD receive, from the 40 bytes at the front of
    /// its buffer (`ibv_create_ah_from_wc`); see [`grh_source_gid`].
    pub fn create_ah_from_grh(&self, grh: &[u8]) -> Result<AddressHandle> {
        let gid = grh_source_gid(grh).ok_or_else(|| {
            Error::Decode("no IPv4 header or IPv6 GRH in the 40-byte receive header".into())
        })?;
        self.create_ah(gid)
    }

    /// An address handle from full attributes.
    pub fn create_ah_with(&self, attr: AhAttr) -> Result<AddressHandle> {
        let ah = self
            .inner
            .ctx
            .nic(|n| n.create_ah(self.inner.pd, attr))
            .map_err(Error::CreateAh)?;
        Ok(AddressHandle {
            pd: self.inner.clone(),
            ah,
            attr,
        })
    }
}

impl std::fmt::Debug for ProtectionDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProtectionDomain({})", self.inner.pd.0)
    }
}

/// The sender's GID from the 40 bytes a UD receive starts with: an IPv6 header (RoCEv2 over
/// IPv6), or, for RoCEv2 over IPv4, 20 unused bytes and then the IPv4 header, as rxe writes it
/// (`union rdma_network_hdr`). `None` when neither is there.
///
/// ```
/// let mut grh = [0u8; 40];
/// grh[20] = 0x45;
/// grh[32..36].copy_from_slice(&[127, 0, 0, 2]);
/// let gid = roce_provider::verbs::grh_source_gid(&grh).unwrap();
/// assert_eq!(roce_emu::ip_from_gid(&gid), "127.0.0.2".parse::<std::net::IpAddr>().unwrap());
/// ```
pub fn grh_source_gid(grh: &[u8]) -> Option<Gid> {
    if grh.len() < 40 {
        return None;
    }
    use roce_wire::ip::{ipv4, ipv6};
    let v4 = ipv4::Packet::new_unchecked(&grh[20..40]);
    if v4.version() == 4 {
        return Some(roce_emu::gid_from_ip(IpAddr::V4(v4.src_addr())));
    }
    let v6 = ipv6::Packet::new_unchecked(&grh[..40]);
    if v6.version() == 6 {
        return Some(v6.src_addr().octets());
    }
    None
}

/// An address handle (`struct ibv_ah`): where a UD send goes.
pub struct AddressHandle {
    pub(crate) pd: Arc<PdInner>,
    pub(crate) ah: roce_emu::Ah,
    attr: AhAttr,
}

impl AddressHandle {
    /// The destination GID.
    pub fn dgid(&self) -> Gid {
        self.attr.dgid
    }
    /// The attributes.
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        let ah = self.ah;
        let _ = self.pd.ctx.nic(|n| n.destroy_ah(ah));
    }
}

impl std::fmt::Debug for AddressHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AddressHandle(to {})",
            roce_emu::ip_from_gid(&self.attr.dgid)
        )
    }
}
