//! The network path of a connected QP or of a UD work request, from an address vector, checked
//! as the kernel checks one on a RoCE port before rxe sees it: `rdma_check_ah_attr` (a valid
//! port, a GRH), the GID cache (`rdma_get_gid_attr`: a populated source GID) and address
//! resolution (`rdma_resolve_ip`: source and destination of one address family). One more rule
//! is ours: the link-local `fe80::` GID is listed, as rxe lists it, but this NIC sends from its
//! IP address only, so a path from it is refused instead of sending nothing (emu README,
//! deviation 18).

use crate::diag::AvProblem;
use crate::verbs::{ip_from_gid, AhAttr, Gid};
use std::net::IpAddr;

/// Network path of a connected QP or of a UD work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Path {
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub tos: u8,
    pub ttl: u8,
    pub flow_label: u32,
}

/// True for a GID in `fe80::/64`.
pub(crate) fn is_link_local(g: &Gid) -> bool {
    g[..8] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0]
}

impl Path {
    /// The path `av` describes on a device whose port 1 has the GID table `gids`, or what is
    /// wrong with it, in the order the kernel finds it.
    pub fn from_av(av: &AhAttr, gids: &[Gid]) -> Result<Path, AvProblem> {
        if av.port_num != 1 {
            return Err(AvProblem::BadPort { port: av.port_num });
        }
        if !av.is_global {
            return Err(AvProblem::NoGrh);
        }
        let index = av.sgid_index;
        let sgid = gids
            .get(index as usize)
            .ok_or(AvProblem::EmptySourceGid { index })?;
        if is_link_local(sgid) {
            return Err(AvProblem::LinkLocalSource { index });
        }
        let src_ip = ip_from_gid(sgid);
        let dst_ip = ip_from_gid(&av.dgid);
        if src_ip.is_ipv4() != dst_ip.is_ipv4() {
            return Err(AvProblem::FamilyMismatch {
                index,
                sgid: *sgid,
                dgid: av.dgid,
            });
        }
        Ok(Path {
            src_ip,
            dst_ip,
            tos: av.traffic_class,
            ttl: av.hop_limit,
            flow_label: av.flow_label,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::gid_from_ip;

    fn gids() -> Vec<Gid> {
        let mut ll = [0u8; 16];
        ll[..2].copy_from_slice(&[0xfe, 0x80]);
        ll[15] = 1;
        vec![ll, gid_from_ip("127.0.0.1".parse().unwrap())]
    }

    #[test]
    fn each_rule_in_the_kernels_order() {
        let g = gids();
        let good = AhAttr::to_ip("127.0.0.2".parse().unwrap());
        assert!(Path::from_av(&good, &g).is_ok());
        let with = |f: &dyn Fn(&mut AhAttr)| {
            let mut a = good;
            f(&mut a);
            Path::from_av(&a, &g).unwrap_err()
        };
        assert_eq!(with(&|a| a.port_num = 0), AvProblem::BadPort { port: 0 });
        // (a bad port is found before the missing GRH)
        assert_eq!(
            with(&|a| {
                a.port_num = 2;
                a.is_global = false
            }),
            AvProblem::BadPort { port: 2 }
        );
        assert_eq!(with(&|a| a.is_global = false), AvProblem::NoGrh);
        assert_eq!(
            with(&|a| a.sgid_index = 2),
            AvProblem::EmptySourceGid { index: 2 }
        );
        assert_eq!(
            with(&|a| a.sgid_index = 0),
            AvProblem::LinkLocalSource { index: 0 }
        );
        assert_eq!(
            with(&|a| a.dgid = g[0]),
            AvProblem::FamilyMismatch {
                index: 1,
                sgid: g[1],
                dgid: g[0]
            }
        );
        assert_eq!(
            with(&|a| a.dgid = [0; 16]),
            AvProblem::FamilyMismatch {
                index: 1,
                sgid: g[1],
                dgid: [0; 16]
            }
        );
    }
}
