//! Sizes and field offsets of our mirrors == rdma-sys's bindgen of the installed verbs.h.
//! (rdma-sys hand-writes a few types instead of generating them — `ibv_wc`, `ibv_send_wr`,
//! `ibv_ah_attr`, `ibv_global_route`, `ibv_async_event`, `ibv_gid`, `ibv_mw_bind_info` — so for
//! those this compares with its hand-written layout; the C-compiler comparison in
//! provider/libibverbs/tests/abi_layout.rs covers them against the header itself.)

#[path = "../../../provider/libibverbs/src/abi/mod.rs"]
#[allow(unused_imports, clippy::all)]
mod abi;

use core::mem::{offset_of, size_of};
use rdma_sys as rs;

macro_rules! fields {
    ($bad:ident, $n:ident, $t:ident; ) => {};
    ($bad:ident, $n:ident, $t:ident; $f:ident => $g:ident $(, $($rest:tt)*)?) => {
        let (ours, theirs) = (offset_of!(abi::$t, $f), offset_of!(rs::$t, $g));
        if ours != theirs {
            $bad.push(format!("{}.{}: ours {ours}, rdma-sys {theirs}", stringify!($t), stringify!($f)));
        }
        $n += 1;
        fields!($bad, $n, $t; $($($rest)*)?);
    };
    ($bad:ident, $n:ident, $t:ident; $f:ident $(, $($rest:tt)*)?) => {
        fields!($bad, $n, $t; $f => $f $(, $($rest)*)?);
    };
}

macro_rules! same {
    ($($t:ident { $($body:tt)* })*) => {{
        let mut bad: Vec<String> = Vec::new();
        let mut n = 0usize;
        $(
            let (ours, theirs) = (size_of::<abi::$t>(), size_of::<rs::$t>());
            if ours != theirs {
                bad.push(format!("sizeof {}: ours {ours}, rdma-sys {theirs}", stringify!($t)));
            }
            n += 1;
            fields!(bad, n, $t; $($body)*);
        )*
        assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
        n
    }};
}

#[test]
fn mirrors_equal_rdma_sys_bindgen() {
    let n = same! {
        ibv_device { _ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path }
        ibv_context_ops { alloc_mw, bind_mw, dealloc_mw, poll_cq, req_notify_cq, post_srq_recv,
            post_send, post_recv, _compat_async_event }
        ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
        verbs_context { query_port, advise_mr, alloc_null_mr, read_counters,
            attach_counters_point_flow, create_counters, destroy_counters, reg_dm_mr, alloc_dm,
            free_dm, modify_flow_action_esp, destroy_flow_action, create_flow_action_esp,
            modify_qp_rate_limit, alloc_parent_domain, dealloc_td, alloc_td, modify_cq,
            post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq,
            create_wq, query_rt_values, create_cq_ex, priv_, query_device_ex, ibv_destroy_flow,
            ABI_placeholder2, ibv_create_flow, ABI_placeholder1, open_qp, create_qp_ex,
            get_srq_num, create_srq_ex, open_xrcd, close_xrcd, _ABI_placeholder3, sz, context }
        ibv_device_attr { fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap,
            vendor_id, vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge,
            max_sge_rd, max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom,
            max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee,
            max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp,
            max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr,
            max_srq, max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt }
        ibv_device_attr_ex { orig_attr, comp_mask, odp_caps, completion_timestamp_mask,
            hca_core_clock, device_cap_flags_ex, tso_caps, rss_caps, max_wq_type_rq,
            packet_pacing_caps, raw_packet_caps, tm_caps, cq_mod_caps, max_dm_size,
            pci_atomic_caps, xrc_odp_caps, phys_port_cnt_ex }
        ibv_odp_caps { general_caps, per_transport_caps }
        ibv_rss_caps { supported_qpts, max_rwq_indirection_tables,
            max_rwq_indirection_table_size, rx_hash_fields_mask, rx_hash_function }
        ibv_tm_caps { max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge }
        ibv_port_attr { state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz,
            bad_pkey_cntr, qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl,
            subnet_timeout, init_type_reply, active_width, active_speed, phys_state, link_layer,
            flags, port_cap_flags2 }
        ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex }
        ibv_pd { context, handle }
        ibv_mr { context, pd, addr, length, handle, lkey, rkey }
        ibv_mw { context, pd, rkey, handle, type_ }
        ibv_comp_channel { context, fd, refcnt }
        ibv_cq { context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
            async_events_completed }
        ibv_cq_ex { context, channel, cq_context, handle, cqe, mutex, cond,
            comp_events_completed, async_events_completed, comp_mask, status, wr_id, start_poll,
            next_poll, end_poll, read_opcode, read_vendor_err, read_byte_len, read_imm_data,
            read_qp_num, read_src_qp, read_wc_flags, read_slid, read_sl, read_dlid_path_bits,
            read_completion_ts, read_cvlan, read_flow_tag, read_tm_info,
            read_completion_wallclock_ns }
        ibv_cq_init_attr_ex { cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags,
            parent_domain }
        ibv_srq { context, srq_context, pd, handle, mutex, cond, events_completed }
        ibv_srq_attr { max_wr, max_sge, srq_limit }
        ibv_srq_init_attr { srq_context, attr }
        ibv_srq_init_attr_ex { srq_context, attr, comp_mask, srq_type, pd, xrcd, cq, tm_cap }
        ibv_qp { context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type,
            mutex, cond, events_completed }
        ibv_qp_ex { qp_base, comp_mask, wr_id, wr_flags, wr_atomic_cmp_swp, wr_atomic_fetch_add,
            wr_bind_mw, wr_local_inv, wr_rdma_read, wr_rdma_write, wr_rdma_write_imm, wr_send,
            wr_send_imm, wr_send_inv, wr_send_tso, wr_set_ud_addr, wr_set_xrc_srqn,
            wr_set_inline_data, wr_set_inline_data_list, wr_set_sge, wr_set_sge_list, wr_start,
            wr_complete, wr_abort, wr_atomic_write }
        ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        ibv_qp_init_attr_ex { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all,
            comp_mask, pd, xrcd, create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf,
            source_qpn, send_ops_flags }
        ibv_rx_hash_conf { rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask }
        ibv_qp_attr { qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn,
            dest_qp_num, qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index,
            en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer,
            port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, rate_limit }
        ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        ibv_ah { context, pd, handle }
        ibv_grh { version_tclass_flow, paylen, next_hdr, hop_limit, sgid, dgid }
        ibv_ece { vendor_id, options, comp_mask }
        ibv_data_buf { addr, length }
        ibv_sge { addr, length, lkey }
        ibv_mw_bind_info { mr, addr, length, mw_access_flags }
        ibv_send_wr { wr_id, next, sg_list, num_sge, opcode, send_flags,
            imm_data => imm_data_invalidated_rkey_union, wr, qp_type, ext => bind_mw_tso_union }
        ibv_recv_wr { wr_id, next, sg_list, num_sge }
        ibv_wc { wr_id, status, opcode, vendor_err, byte_len,
            imm_data => imm_data_invalidated_rkey_union, qp_num, src_qp, wc_flags, pkey_index,
            slid, sl, dlid_path_bits }
        ibv_async_event { element, event_type }
        ibv_gid { raw }
    };
    println!("{n} sizes and offsets equal rdma-sys's");
}
