//! What the emulated device reports: rxe's `rxe_param.h` defaults (roce-spec-notes C.14), with
//! identity fields that say it is this emulator.

#![forbid(unsafe_code)]

use crate::abi::*;
use crate::config::DeviceConfig;

pub const FW_VER: &str = "0.0.0";
pub const BOARD_ID: &str = "roce-emu (userspace RoCEv2 NIC)";
pub const NODE_DESC: &str = "roce userspace RoCEv2 emulator";
pub const PHYS_PORT_CNT: u8 = 1;
pub const GID_TBL_LEN: i32 = 1024;
pub const PKEY_TBL_LEN: u16 = 64;
pub const DEFAULT_PKEY: u16 = 0xffff;
/// rxe's `RXE_VENDOR_ID` (IBTA A3.3.1: no OUI), as Debian 12's kernel rxe reports it;
/// `vendor_part_id` and `hw_ver` are 0 there too.
pub const VENDOR_ID: u32 = 0xFF_FFFF;
/// `IB_PORT_PHYS_STATE_LINK_UP`
pub const PHYS_STATE_LINK_UP: u8 = 5;

fn fw_ver_field() -> [core::ffi::c_char; 64] {
    let mut out = [0; 64];
    for (d, s) in out.iter_mut().zip(FW_VER.bytes()) {
        *d = s as core::ffi::c_char;
    }
    out
}

pub fn device_attr(cfg: &DeviceConfig) -> ibv_device_attr {
    ibv_device_attr {
        fw_ver: fw_ver_field(),
        node_guid: cfg.node_guid_be(),
        sys_image_guid: cfg.node_guid_be(),
        max_mr_size: u64::MAX,
        page_size_cap: 0xffff_f000,
        vendor_id: VENDOR_ID,
        vendor_part_id: 0,
        hw_ver: 0,
        max_qp: 0x10000,
        max_qp_wr: 0x4000,
        device_cap_flags: IBV_DEVICE_BAD_PKEY_CNTR
            | IBV_DEVICE_BAD_QKEY_CNTR
            | IBV_DEVICE_AUTO_PATH_MIG
            | IBV_DEVICE_CHANGE_PHY_PORT
            | IBV_DEVICE_UD_AV_PORT_ENFORCE
            | IBV_DEVICE_PORT_ACTIVE_EVENT
            | IBV_DEVICE_SYS_IMAGE_GUID
            | IBV_DEVICE_RC_RNR_NAK_GEN
            | IBV_DEVICE_MEM_WINDOW
            | IBV_DEVICE_MEM_WINDOW_TYPE_2B,
        max_sge: 32,
        max_sge_rd: 32,
        max_cq: 16384,
        max_cqe: (1 << 15) - 1,
        max_mr: 256 * 1024,
        max_pd: 0x7ffc,
        max_qp_rd_atom: 128,
        max_ee_rd_atom: 0,
        max_res_rd_atom: 0x3f000,
        max_qp_init_rd_atom: 128,
        max_ee_init_rd_atom: 0,
        atomic_cap: IBV_ATOMIC_HCA,
        max_ee: 0,
        max_rdd: 0,
        max_mw: 4096,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        // rxe: 8192 groups, 56 QPs each, 0x70000 attachments. Multicast is refused here
        // (ibv_attach_mcast, rdma_join_multicast: EOPNOTSUPP), so none is advertised: programs
        // and test suites that check these skip multicast instead of failing later.
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
        max_ah: 100,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: 960,
        max_srq_wr: 0x4000,
        max_srq_sge: 27,
        max_pkeys: 64,
        local_ca_ack_delay: 15,
        phys_port_cnt: PHYS_PORT_CNT,
    }
}

pub fn device_attr_ex(cfg: &DeviceConfig) -> ibv_device_attr_ex {
    ibv_device_attr_ex {
        orig_attr: device_attr(cfg),
        comp_mask: 0,
        odp_caps: Default::default(),
        completion_timestamp_mask: 0,
        hca_core_clock: 0,
        // rxe (>= 6.2, 64-bit) adds FLUSH_GLOBAL, FLUSH_PERSISTENT and ATOMIC_WRITE
        // (rxe_param.h); it advertises FLUSH_PERSISTENT though it registers no region for it
        // outside persistent memory, and so do we
        device_cap_flags_ex: u64::from(device_attr(cfg).device_cap_flags)
            | IB_UVERBS_DEVICE_FLUSH_GLOBAL
            | IB_UVERBS_DEVICE_FLUSH_PERSISTENT
            | IB_UVERBS_DEVICE_ATOMIC_WRITE,
        tso_caps: Default::default(),
        rss_caps: Default::default(),
        max_wq_type_rq: 0,
        packet_pacing_caps: Default::default(),
        raw_packet_caps: 0,
        tm_caps: Default::default(),
        cq_mod_caps: Default::default(),
        max_dm_size: 0,
        pci_atomic_caps: Default::default(),
        xrc_odp_caps: 0,
        phys_port_cnt_ex: u32::from(PHYS_PORT_CNT),
    }
}

pub fn port_attr(cfg: &DeviceConfig) -> ibv_port_attr_ext {
    ibv_port_attr_ext {
        base: ibv_port_attr {
            state: IBV_PORT_ACTIVE,
            max_mtu: IBV_MTU_4096,
            active_mtu: cfg.active_mtu,
            gid_tbl_len: GID_TBL_LEN,
            port_cap_flags: IBV_PORT_CM_SUP,
            max_msg_sz: 0x80_0000,
            bad_pkey_cntr: 0,
            qkey_viol_cntr: 0,
            pkey_tbl_len: PKEY_TBL_LEN,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            max_vl_num: 1,
            sm_sl: 0,
            subnet_timeout: 0,
            init_type_reply: 0,
            active_width: 1,
            active_speed: 1,
            phys_state: PHYS_STATE_LINK_UP,
            link_layer: IBV_LINK_LAYER_ETHERNET,
            flags: 0,
            port_cap_flags2: 0,
        },
        active_speed_ex: 0,
    }
}

/// The GID at `index` (zero for an empty slot, as libibverbs returns for rxe) or `None` if the
/// index is outside the table.
pub fn gid(cfg: &DeviceConfig, index: i64) -> Option<[u8; 16]> {
    if !(0..i64::from(GID_TBL_LEN)).contains(&index) {
        return None;
    }
    Some(cfg.gids().get(index as usize).copied().unwrap_or([0; 16]))
}

/// Number of populated GID entries.
pub fn gid_count(cfg: &DeviceConfig) -> usize {
    cfg.gids().len()
}
