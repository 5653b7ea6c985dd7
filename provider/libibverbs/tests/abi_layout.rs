//! Every size and field offset of our `#[repr(C)]` mirrors (src/abi/) against the installed
//! `<infiniband/verbs.h>`, measured by compiling a C program with the system compiler: the
//! compiler's own answer is the ABI. (The rdma-sys/bindgen comparison is `tests/abi/` at the
//! workspace root, driven by `abi_rdma_sys.rs`.)
//!
//! The same for librdmacm's structs and constants against `<rdma/rdma_cma.h>`.
//!
//! Prerequisites: a C compiler (`cc`), `libibverbs-dev` and `librdmacm-dev` (the headers). Missing → FAIL under
//! `CI=true`, else a loud SKIP.

mod common;

#[path = "../src/abi/mod.rs"]
#[allow(unused_imports)]
mod abi;

use abi::*;
use common::*;
use core::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

struct Item {
    c: String,
    rust: usize,
}

macro_rules! layout {
    ($out:ident; $($t:ident $(as $ct:literal)? { $($f:ident $(as $cf:literal)?),* $(,)? })*) => {$(
        let cty: String = layout!(@ty stringify!($t) $(, $ct)?);
        $out.push(Item { c: format!("sizeof({cty})"), rust: size_of::<$t>() });
        $out.push(Item { c: format!("_Alignof({cty})"), rust: core::mem::align_of::<$t>() });
        $( $out.push(Item {
            c: format!("offsetof({cty}, {})", layout!(@f stringify!($f) $(, $cf)?)),
            rust: offset_of!($t, $f),
        }); )*
    )*};
    (@ty $d:expr) => { format!("struct {}", $d) };
    (@ty $d:expr, $o:expr) => { $o.to_string() };
    (@f $d:expr) => { $d };
    (@f $d:expr, $o:expr) => { $o };
}

fn items() -> Vec<Item> {
    let mut v = Vec::new();
    layout!(v;
        ibv_gid as "union ibv_gid" { raw }
        _ibv_device_ops { _dummy1, _dummy2 }
        ibv_device { _ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path }
        ibv_context_ops {
            _compat_query_device, _compat_query_port, _compat_alloc_pd, _compat_dealloc_pd,
            _compat_reg_mr, _compat_rereg_mr, _compat_dereg_mr, alloc_mw, bind_mw, dealloc_mw,
            _compat_create_cq, poll_cq, req_notify_cq, _compat_cq_event, _compat_resize_cq,
            _compat_destroy_cq, _compat_create_srq, _compat_modify_srq, _compat_query_srq,
            _compat_destroy_srq, post_srq_recv, _compat_create_qp, _compat_query_qp,
            _compat_modify_qp, _compat_destroy_qp, post_send, post_recv, _compat_create_ah,
            _compat_destroy_ah, _compat_attach_mcast, _compat_detach_mcast, _compat_async_event,
        }
        ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
        verbs_context {
            query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow,
            create_counters, destroy_counters, reg_dm_mr, alloc_dm, free_dm,
            modify_flow_action_esp, destroy_flow_action, create_flow_action_esp,
            modify_qp_rate_limit, alloc_parent_domain, dealloc_td, alloc_td, modify_cq,
            post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq,
            create_wq, query_rt_values, create_cq_ex, priv_ as "priv", query_device_ex,
            ibv_destroy_flow, ABI_placeholder2, ibv_create_flow, ABI_placeholder1, open_qp,
            create_qp_ex, get_srq_num, create_srq_ex, open_xrcd, close_xrcd, _ABI_placeholder3,
            sz, context,
        }
        ibv_device_attr {
            fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id,
            vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd,
            max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom,
            max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd, max_mw,
            max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach,
            max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr,
            max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt,
        }
        ibv_query_device_ex_input { comp_mask }
        ibv_odp_caps { general_caps, per_transport_caps }
        ibv_tso_caps { max_tso, supported_qpts }
        ibv_rss_caps {
            supported_qpts, max_rwq_indirection_tables, max_rwq_indirection_table_size,
            rx_hash_fields_mask, rx_hash_function,
        }
        ibv_packet_pacing_caps { qp_rate_limit_min, qp_rate_limit_max, supported_qpts }
        ibv_tm_caps { max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge }
        ibv_cq_moderation_caps { max_cq_count, max_cq_period }
        ibv_pci_atomic_caps { fetch_add, swap, compare_swap }
        ibv_device_attr_ex {
            orig_attr, comp_mask, odp_caps, completion_timestamp_mask, hca_core_clock,
            device_cap_flags_ex, tso_caps, rss_caps, max_wq_type_rq, packet_pacing_caps,
            raw_packet_caps, tm_caps, cq_mod_caps, max_dm_size, pci_atomic_caps, xrc_odp_caps,
            phys_port_cnt_ex,
        }
        ibv_port_attr {
            state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, bad_pkey_cntr,
            qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout,
            init_type_reply, active_width, active_speed, phys_state, link_layer, flags,
            port_cap_flags2,
        }
        ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex }
        ibv_pd { context, handle }
        ibv_mr { context, pd, addr, length, handle, lkey, rkey }
        ibv_mw { context, pd, rkey, handle, type_ as "type" }
        ibv_comp_channel { context, fd, refcnt }
        ibv_cq {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
            async_events_completed,
        }
        ibv_poll_cq_attr { comp_mask }
        ibv_cq_ex {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
            async_events_completed, comp_mask, status, wr_id, start_poll, next_poll, end_poll,
            read_opcode, read_vendor_err, read_byte_len, read_imm_data, read_qp_num, read_src_qp,
            read_wc_flags, read_slid, read_sl, read_dlid_path_bits, read_completion_ts,
            read_cvlan, read_flow_tag, read_tm_info, read_completion_wallclock_ns,
        }
        ibv_cq_init_attr_ex { cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags, parent_domain }
        ibv_srq_attr { max_wr, max_sge, srq_limit }
        ibv_srq_init_attr { srq_context, attr }
        ibv_tm_cap { max_num_tags, max_ops }
        ibv_srq_init_attr_ex { srq_context, attr, comp_mask, srq_type, pd, xrcd, cq, tm_cap }
        ibv_srq { context, srq_context, pd, handle, mutex, cond, events_completed }
        ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        ibv_qp {
            context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type,
            mutex, cond, events_completed,
        }
        ibv_qp_ex {
            qp_base, comp_mask, wr_id, wr_flags, wr_atomic_cmp_swp, wr_atomic_fetch_add,
            wr_bind_mw, wr_local_inv, wr_rdma_read, wr_rdma_write, wr_rdma_write_imm, wr_send,
            wr_send_imm, wr_send_inv, wr_send_tso, wr_set_ud_addr, wr_set_xrc_srqn,
            wr_set_inline_data, wr_set_inline_data_list, wr_set_sge, wr_set_sge_list, wr_start,
            wr_complete, wr_abort, wr_atomic_write,
        }
        ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        ibv_rx_hash_conf { rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask }
        ibv_qp_init_attr_ex {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd,
            create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn, send_ops_flags,
        }
        ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        ibv_qp_attr {
            qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num,
            qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index,
            en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer,
            port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, rate_limit,
        }
        ibv_ah { context, pd, handle }
        ibv_grh { version_tclass_flow, paylen, next_hdr, hop_limit, sgid, dgid }
        ibv_ece { vendor_id, options, comp_mask }
        ibv_data_buf { addr, length }
        ibv_sge { addr, length, lkey }
        ibv_mw_bind_info { mr, addr, length, mw_access_flags }
        ibv_mw_bind { wr_id, send_flags, bind_info }
        ibv_send_wr {
            wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr, qp_type,
            ext as "bind_mw",
        }
        ibv_recv_wr { wr_id, next, sg_list, num_sge }
        ibv_wc {
            wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp, wc_flags,
            pkey_index, slid, sl, dlid_path_bits,
        }
        ibv_async_event { element, event_type }
    );

    // Members of anonymous structs and unions, by their C designators.
    let sw = |f: usize| offset_of!(ibv_send_wr, wr) + f;
    let ext = |f: usize| offset_of!(ibv_send_wr, ext) + f;
    // <rdma/rdma_cma.h> (librdmacm-dev) and <infiniband/sa.h>
    layout!(v;
        rdma_event_channel { fd }
        rdma_ib_addr { sgid, dgid, pkey }
        rdma_addr { src_addr, dst_addr, ibaddr as "addr.ibaddr" }
        rdma_route { addr, path_rec, num_paths }
        ibv_sa_path_rec {
            dgid, sgid, dlid, slid, raw_traffic, flow_label, hop_limit, traffic_class,
            reversible, numb_path, pkey, sl, mtu_selector, mtu, rate_selector, rate,
            packet_life_time_selector, packet_life_time, preference,
        }
        rdma_cm_id {
            verbs, channel, context, qp, route, ps, port_num, event, send_cq_channel, send_cq,
            recv_cq_channel, recv_cq, srq, pd, qp_type,
        }
        rdma_conn_param {
            private_data, private_data_len, responder_resources, initiator_depth,
            flow_control, retry_count, rnr_retry_count, srq, qp_num,
        }
        rdma_ud_param { private_data, private_data_len, ah_attr, qp_num, qkey }
        rdma_cm_event { id, listen_id, event, status, param }
        rdma_addrinfo {
            ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len,
            ai_src_addr, ai_dst_addr, ai_src_canonname, ai_dst_canonname, ai_route_len,
            ai_route, ai_connect_len, ai_connect, ai_next,
        }
    );
    let more: &[(&str, usize)] = &[
        (
            "offsetof(struct ibv_send_wr, invalidate_rkey)",
            offset_of!(ibv_send_wr, imm_data),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.rdma.remote_addr)",
            sw(offset_of!(ibv_send_wr_rdma, remote_addr)),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.rdma.rkey)",
            sw(offset_of!(ibv_send_wr_rdma, rkey)),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.atomic.remote_addr)",
            sw(offset_of!(ibv_send_wr_atomic, remote_addr)),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.atomic.compare_add)",
            sw(offset_of!(ibv_send_wr_atomic, compare_add)),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.atomic.swap)",
            sw(offset_of!(ibv_send_wr_atomic, swap)),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.atomic.rkey)",
            sw(offset_of!(ibv_send_wr_atomic, rkey)),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.ud.ah)",
            sw(offset_of!(ibv_send_wr_ud, ah)),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.ud.remote_qpn)",
            sw(offset_of!(ibv_send_wr_ud, remote_qpn)),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.ud.remote_qkey)",
            sw(offset_of!(ibv_send_wr_ud, remote_qkey)),
        ),
        (
            "sizeof(((struct ibv_send_wr *)0)->wr)",
            size_of::<ibv_send_wr_wr>(),
        ),
        (
            "offsetof(struct ibv_send_wr, qp_type.xrc.remote_srqn)",
            offset_of!(ibv_send_wr, qp_type),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.mw)",
            ext(offset_of!(ibv_send_wr_bind_mw, mw)),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.rkey)",
            ext(offset_of!(ibv_send_wr_bind_mw, rkey)),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.bind_info)",
            ext(offset_of!(ibv_send_wr_bind_mw, bind_info)),
        ),
        (
            "offsetof(struct ibv_send_wr, tso.hdr)",
            ext(offset_of!(ibv_send_wr_tso, hdr)),
        ),
        (
            "offsetof(struct ibv_send_wr, tso.hdr_sz)",
            ext(offset_of!(ibv_send_wr_tso, hdr_sz)),
        ),
        (
            "offsetof(struct ibv_send_wr, tso.mss)",
            ext(offset_of!(ibv_send_wr_tso, mss)),
        ),
        (
            "offsetof(struct ibv_wc, invalidated_rkey)",
            offset_of!(ibv_wc, imm_data),
        ),
        (
            "offsetof(struct ibv_odp_caps, per_transport_caps.rc_odp_caps)",
            offset_of!(ibv_odp_caps, per_transport_caps)
                + offset_of!(ibv_odp_caps_per_transport, rc_odp_caps),
        ),
        (
            "offsetof(struct ibv_odp_caps, per_transport_caps.ud_odp_caps)",
            offset_of!(ibv_odp_caps, per_transport_caps)
                + offset_of!(ibv_odp_caps_per_transport, ud_odp_caps),
        ),
        (
            "sizeof(((struct ibv_async_event *)0)->element)",
            size_of::<ibv_async_event_element>(),
        ),
        // `struct _compat_ibv_port_attr` is incomplete in v44 verbs.h: it is the fields before
        // `port_cap_flags2`.
        (
            "offsetof(struct ibv_port_attr, port_cap_flags2)",
            COMPAT_PORT_ATTR_LEN,
        ),
        // rdma-core v45 appends `wr_flush` to v44's `ibv_qp_ex`: our QPs carry that slot
        // right after the installed header's struct.
        (
            "sizeof(struct ibv_qp_ex)",
            offset_of!(ibv_qp_ex_ext, wr_flush),
        ),
        ("sizeof(pthread_mutex_t)", size_of::<pthread_mutex_t>()),
        ("sizeof(pthread_cond_t)", size_of::<pthread_cond_t>()),
        ("IBV_SYSFS_NAME_MAX", IBV_SYSFS_NAME_MAX),
        ("IBV_SYSFS_PATH_MAX", IBV_SYSFS_PATH_MAX),
        ("(size_t)__VERBS_ABI_IS_EXTENDED", VERBS_ABI_IS_EXTENDED),
    ];
    v.extend(more.iter().map(|(c, r)| Item {
        c: c.to_string(),
        rust: *r,
    }));
    v
}

/// Enum and flag values we hard-code, against the header.
fn constants() -> Vec<Item> {
    let c: &[(&str, i64)] = &[
        ("IBV_NODE_CA", IBV_NODE_CA as i64),
        ("IBV_TRANSPORT_IB", IBV_TRANSPORT_IB as i64),
        ("IBV_PORT_ACTIVE", IBV_PORT_ACTIVE as i64),
        ("IBV_MTU_1024", IBV_MTU_1024 as i64),
        ("IBV_MTU_4096", IBV_MTU_4096 as i64),
        ("IBV_LINK_LAYER_ETHERNET", IBV_LINK_LAYER_ETHERNET as i64),
        ("IBV_ATOMIC_HCA", IBV_ATOMIC_HCA as i64),
        ("IBV_QPT_RC", IBV_QPT_RC as i64),
        ("IBV_QPT_UC", IBV_QPT_UC as i64),
        ("IBV_QPT_UD", IBV_QPT_UD as i64),
        ("IBV_QPT_XRC_RECV", IBV_QPT_XRC_RECV as i64),
        ("IBV_QPS_RESET", IBV_QPS_RESET as i64),
        ("IBV_QPS_RTS", IBV_QPS_RTS as i64),
        ("IBV_QPS_ERR", IBV_QPS_ERR as i64),
        ("IBV_QP_STATE", IBV_QP_STATE as i64),
        ("IBV_QP_DEST_QPN", IBV_QP_DEST_QPN as i64),
        ("IBV_QP_RATE_LIMIT", IBV_QP_RATE_LIMIT as i64),
        ("RDMA_PS_IPOIB", RDMA_PS_IPOIB as i64),
        ("RDMA_PS_IB", RDMA_PS_IB as i64),
        ("RDMA_PS_TCP", RDMA_PS_TCP as i64),
        ("RDMA_PS_UDP", RDMA_PS_UDP as i64),
        ("RDMA_MAX_RESP_RES", RDMA_MAX_RESP_RES as i64),
        ("RDMA_MAX_INIT_DEPTH", RDMA_MAX_INIT_DEPTH as i64),
        ("RDMA_UDP_QKEY", RDMA_UDP_QKEY as i64),
        ("RAI_PASSIVE", RAI_PASSIVE as i64),
        ("RAI_NUMERICHOST", RAI_NUMERICHOST as i64),
        ("RAI_NOROUTE", RAI_NOROUTE as i64),
        ("RAI_FAMILY", RAI_FAMILY as i64),
        ("RDMA_OPTION_ID", RDMA_OPTION_ID as i64),
        ("RDMA_OPTION_IB", RDMA_OPTION_IB as i64),
        ("RDMA_OPTION_ID_TOS", RDMA_OPTION_ID_TOS as i64),
        ("RDMA_OPTION_ID_REUSEADDR", RDMA_OPTION_ID_REUSEADDR as i64),
        ("RDMA_OPTION_ID_AFONLY", RDMA_OPTION_ID_AFONLY as i64),
        (
            "RDMA_OPTION_ID_ACK_TIMEOUT",
            RDMA_OPTION_ID_ACK_TIMEOUT as i64,
        ),
        ("RDMA_OPTION_IB_PATH", RDMA_OPTION_IB_PATH as i64),
        ("RDMA_CM_EVENT_CONNECT_REQUEST", 4),
        ("RDMA_CM_EVENT_ESTABLISHED", 9),
        ("RDMA_CM_EVENT_TIMEWAIT_EXIT", 15),
        ("IBV_WR_SEND", IBV_WR_SEND as i64),
        ("IBV_WR_RDMA_READ", IBV_WR_RDMA_READ as i64),
        (
            "IBV_WR_ATOMIC_FETCH_AND_ADD",
            IBV_WR_ATOMIC_FETCH_AND_ADD as i64,
        ),
        ("IBV_WR_ATOMIC_WRITE", IBV_WR_ATOMIC_WRITE as i64),
        ("IBV_SEND_SIGNALED", IBV_SEND_SIGNALED as i64),
        ("IBV_SEND_INLINE", IBV_SEND_INLINE as i64),
        ("IBV_WC_WR_FLUSH_ERR", IBV_WC_WR_FLUSH_ERR as i64),
        (
            "IBV_WC_TM_RNDV_INCOMPLETE",
            IBV_WC_TM_RNDV_INCOMPLETE as i64,
        ),
        (
            "IBV_WC_RECV_RDMA_WITH_IMM",
            IBV_WC_RECV_RDMA_WITH_IMM as i64,
        ),
        ("IBV_WC_ATOMIC_WRITE", IBV_WC_ATOMIC_WRITE as i64),
        ("IBV_WC_GRH", IBV_WC_GRH as i64),
        ("IBV_WC_WITH_INV", IBV_WC_WITH_INV as i64),
        ("IBV_ACCESS_REMOTE_ATOMIC", IBV_ACCESS_REMOTE_ATOMIC as i64),
        (
            "IBV_ACCESS_OPTIONAL_RANGE",
            IBV_ACCESS_OPTIONAL_RANGE as i64,
        ),
        ("IBV_EVENT_PORT_ACTIVE", IBV_EVENT_PORT_ACTIVE as i64),
        (
            "IBV_EVENT_SRQ_LIMIT_REACHED",
            IBV_EVENT_SRQ_LIMIT_REACHED as i64,
        ),
        ("IBV_GID_TYPE_ROCE_V2", IBV_GID_TYPE_ROCE_V2 as i64),
        ("IBV_FORK_UNNEEDED", IBV_FORK_UNNEEDED as i64),
        ("IBV_PORT_CM_SUP", IBV_PORT_CM_SUP as i64),
        (
            "IBV_DEVICE_MEM_MGT_EXTENSIONS",
            IBV_DEVICE_MEM_MGT_EXTENSIONS as i64,
        ),
        ("IBV_QP_INIT_ATTR_PD", IBV_QP_INIT_ATTR_PD as i64),
        (
            "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS",
            IBV_QP_INIT_ATTR_SEND_OPS_FLAGS as i64,
        ),
        (
            "IBV_QP_INIT_ATTR_CREATE_FLAGS",
            IBV_QP_INIT_ATTR_CREATE_FLAGS as i64,
        ),
        (
            "IBV_QP_EX_WITH_RDMA_WRITE",
            IBV_QP_EX_WITH_RDMA_WRITE as i64,
        ),
        ("IBV_QP_EX_WITH_SEND", IBV_QP_EX_WITH_SEND as i64),
        ("IBV_QP_EX_WITH_RDMA_READ", IBV_QP_EX_WITH_RDMA_READ as i64),
        (
            "IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD",
            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD as i64,
        ),
        ("IBV_QP_EX_WITH_LOCAL_INV", IBV_QP_EX_WITH_LOCAL_INV as i64),
        ("IBV_QP_EX_WITH_BIND_MW", IBV_QP_EX_WITH_BIND_MW as i64),
        (
            "IBV_QP_EX_WITH_SEND_WITH_INV",
            IBV_QP_EX_WITH_SEND_WITH_INV as i64,
        ),
        ("IBV_QP_EX_WITH_TSO", IBV_QP_EX_WITH_TSO as i64),
        (
            "IBV_QP_EX_WITH_ATOMIC_WRITE",
            IBV_QP_EX_WITH_ATOMIC_WRITE as i64,
        ),
    ];
    c.iter()
        .map(|(n, v)| Item {
            c: format!("(long long){n}"),
            rust: *v as usize,
        })
        .collect()
}

#[test]
fn mirrors_match_the_installed_verbs_h() {
    let header = Path::new("/usr/include/infiniband/verbs.h");
    if !prerequisite(
        which("cc").is_some(),
        "a C compiler `cc` (apt-get install gcc)",
    ) || !prerequisite(
        header.exists(),
        "infiniband/verbs.h (apt-get install libibverbs-dev)",
    ) || !prerequisite(
        Path::new("/usr/include/rdma/rdma_cma.h").exists(),
        "rdma/rdma_cma.h (apt-get install librdmacm-dev)",
    ) {
        return;
    }
    let mut all = items();
    let n_layout = all.len();
    all.extend(constants());
    let dir = std::env::temp_dir().join(format!("roce-ibverbs-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n\
         #include <rdma/rdma_cma.h>\nint main(void) {\n",
    );
    for it in &all {
        src.push_str(&format!(
            "    printf(\"%lld\\n\", (long long)({}));\n",
            it.c
        ));
    }
    src.push_str("    return 0;\n}\n");
    let c = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&c, &src).unwrap();
    let cc = Command::new("cc")
        .args(["-std=gnu11", "-o"])
        .arg(&exe)
        .arg(&c)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let got: Vec<i64> = text.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(got.len(), all.len());
    let mut bad = Vec::new();
    for (it, g) in all.iter().zip(&got) {
        if it.rust as i64 != *g && !(it.rust == usize::MAX && *g == -1) {
            bad.push(format!("{}: verbs.h {g}, ours {}", it.c, it.rust as i64));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
    println!(
        "{n_layout} sizes/alignments/offsets and {} constants equal the installed verbs.h and rdma_cma.h",
        all.len() - n_layout
    );
}
