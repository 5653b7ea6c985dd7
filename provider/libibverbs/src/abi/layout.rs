//! Compile-time layout checks (x86_64 values, roce-spec-notes E.5 = installed v44 verbs.h).

use super::*;
use core::mem::{offset_of, size_of};

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("roce-ibverbs mirrors the x86_64 Linux libibverbs ABI only");

macro_rules! assert_layout {
    ($t:ty, $size:expr $(, $field:ident = $off:expr)* $(,)?) => {
        const _: () = {
            assert!(size_of::<$t>() == $size, concat!("sizeof ", stringify!($t)));
            $(assert!(offset_of!($t, $field) == $off, concat!(stringify!($t), ".", stringify!($field)));)*
        };
    };
}

assert_layout!(ibv_gid, 16);
assert_layout!(
    ibv_device,
    664,
    node_type = 16,
    transport_type = 20,
    name = 24,
    dev_name = 88,
    dev_path = 152,
    ibdev_path = 408
);
assert_layout!(
    ibv_context_ops,
    256,
    alloc_mw = 56,
    bind_mw = 64,
    dealloc_mw = 72,
    poll_cq = 88,
    req_notify_cq = 96,
    post_srq_recv = 160,
    post_send = 200,
    post_recv = 208,
    _compat_async_event = 248
);
assert_layout!(
    ibv_context,
    328,
    device = 0,
    ops = 8,
    cmd_fd = 264,
    async_fd = 268,
    num_comp_vectors = 272,
    mutex = 280,
    abi_compat = 320
);
assert_layout!(
    verbs_context,
    648,
    query_port = 0,
    create_cq_ex = 200,
    priv_ = 208,
    query_device_ex = 216,
    ibv_destroy_flow = 224,
    ibv_create_flow = 240,
    open_qp = 256,
    create_qp_ex = 264,
    get_srq_num = 272,
    create_srq_ex = 280,
    open_xrcd = 288,
    close_xrcd = 296,
    _ABI_placeholder3 = 304,
    sz = 312,
    context = 320
);
assert_layout!(
    ibv_device_attr,
    232,
    node_guid = 64,
    sys_image_guid = 72,
    max_mr_size = 80,
    page_size_cap = 88,
    vendor_id = 96,
    max_qp = 108,
    atomic_cap = 164,
    max_pkeys = 224,
    local_ca_ack_delay = 226,
    phys_port_cnt = 227
);
assert_layout!(
    ibv_device_attr_ex,
    400,
    comp_mask = 232,
    odp_caps = 240,
    completion_timestamp_mask = 264,
    hca_core_clock = 272,
    device_cap_flags_ex = 280,
    tso_caps = 288,
    rss_caps = 296,
    max_wq_type_rq = 328,
    packet_pacing_caps = 332,
    raw_packet_caps = 344,
    tm_caps = 348,
    cq_mod_caps = 368,
    max_dm_size = 376,
    pci_atomic_caps = 384,
    xrc_odp_caps = 392,
    phys_port_cnt_ex = 396
);
assert_layout!(
    ibv_port_attr,
    52,
    state = 0,
    max_mtu = 4,
    active_mtu = 8,
    gid_tbl_len = 12,
    port_cap_flags = 16,
    max_msg_sz = 20,
    bad_pkey_cntr = 24,
    qkey_viol_cntr = 28,
    pkey_tbl_len = 32,
    lid = 34,
    sm_lid = 36,
    lmc = 38,
    max_vl_num = 39,
    sm_sl = 40,
    subnet_timeout = 41,
    init_type_reply = 42,
    active_width = 43,
    active_speed = 44,
    phys_state = 45,
    link_layer = 46,
    flags = 47,
    port_cap_flags2 = 48
);
assert_layout!(ibv_port_attr_ext, 56, active_speed_ex = 52);
assert_layout!(
    ibv_gid_entry,
    32,
    gid = 0,
    gid_index = 16,
    port_num = 20,
    gid_type = 24,
    ndev_ifindex = 28
);
assert_layout!(ibv_pd, 16, context = 0, handle = 8);
assert_layout!(
    ibv_mr,
    48,
    context = 0,
    pd = 8,
    addr = 16,
    length = 24,
    handle = 32,
    lkey = 36,
    rkey = 40
);
assert_layout!(
    ibv_mw,
    32,
    context = 0,
    pd = 8,
    rkey = 16,
    handle = 20,
    type_ = 24
);
assert_layout!(ibv_comp_channel, 16, context = 0, fd = 8, refcnt = 12);
assert_layout!(
    ibv_cq,
    128,
    context = 0,
    channel = 8,
    cq_context = 16,
    handle = 24,
    cqe = 28,
    mutex = 32,
    cond = 72,
    comp_events_completed = 120,
    async_events_completed = 124
);
assert_layout!(
    ibv_cq_ex,
    288,
    comp_mask = 128,
    status = 132,
    wr_id = 136,
    start_poll = 144,
    next_poll = 152,
    end_poll = 160,
    read_opcode = 168,
    read_completion_wallclock_ns = 280
);
assert_layout!(
    ibv_cq_init_attr_ex,
    56,
    cqe = 0,
    cq_context = 8,
    channel = 16,
    comp_vector = 24,
    wc_flags = 32,
    comp_mask = 40,
    flags = 44,
    parent_domain = 48
);
assert_layout!(
    ibv_srq,
    128,
    context = 0,
    srq_context = 8,
    pd = 16,
    handle = 24,
    mutex = 32,
    cond = 72,
    events_completed = 120
);
assert_layout!(ibv_srq_attr, 12);
assert_layout!(ibv_srq_init_attr, 24, srq_context = 0, attr = 8);
assert_layout!(
    ibv_srq_init_attr_ex,
    64,
    comp_mask = 20,
    srq_type = 24,
    pd = 32,
    xrcd = 40,
    cq = 48,
    tm_cap = 56
);
assert_layout!(
    ibv_qp,
    160,
    context = 0,
    qp_context = 8,
    pd = 16,
    send_cq = 24,
    recv_cq = 32,
    srq = 40,
    handle = 48,
    qp_num = 52,
    state = 56,
    qp_type = 60,
    mutex = 64,
    cond = 104,
    events_completed = 152
);
assert_layout!(
    ibv_qp_ex,
    352,
    qp_base = 0,
    comp_mask = 160,
    wr_id = 168,
    wr_flags = 176,
    wr_atomic_cmp_swp = 184,
    wr_send = 240,
    wr_set_sge = 304,
    wr_start = 320,
    wr_complete = 328,
    wr_abort = 336,
    wr_atomic_write = 344
);
assert_layout!(ibv_qp_ex_ext, 360, wr_flush = 352);
assert_layout!(ibv_qp_cap, 20);
assert_layout!(
    ibv_qp_init_attr,
    64,
    qp_context = 0,
    send_cq = 8,
    recv_cq = 16,
    srq = 24,
    cap = 32,
    qp_type = 52,
    sq_sig_all = 56
);
assert_layout!(
    ibv_qp_init_attr_ex,
    136,
    comp_mask = 60,
    pd = 64,
    xrcd = 72,
    create_flags = 80,
    max_tso_header = 84,
    rwq_ind_tbl = 88,
    rx_hash_conf = 96,
    source_qpn = 120,
    send_ops_flags = 128
);
assert_layout!(
    ibv_global_route,
    24,
    dgid = 0,
    flow_label = 16,
    sgid_index = 20,
    hop_limit = 21,
    traffic_class = 22
);
assert_layout!(
    ibv_ah_attr,
    32,
    grh = 0,
    dlid = 24,
    sl = 26,
    src_path_bits = 27,
    static_rate = 28,
    is_global = 29,
    port_num = 30
);
assert_layout!(
    ibv_qp_attr,
    144,
    qp_state = 0,
    cur_qp_state = 4,
    path_mtu = 8,
    path_mig_state = 12,
    qkey = 16,
    rq_psn = 20,
    sq_psn = 24,
    dest_qp_num = 28,
    qp_access_flags = 32,
    cap = 36,
    ah_attr = 56,
    alt_ah_attr = 88,
    pkey_index = 120,
    alt_pkey_index = 122,
    en_sqd_async_notify = 124,
    sq_draining = 125,
    max_rd_atomic = 126,
    max_dest_rd_atomic = 127,
    min_rnr_timer = 128,
    port_num = 129,
    timeout = 130,
    retry_cnt = 131,
    rnr_retry = 132,
    alt_port_num = 133,
    alt_timeout = 134,
    rate_limit = 136
);
assert_layout!(ibv_ah, 24, context = 0, pd = 8, handle = 16);
assert_layout!(
    ibv_grh,
    40,
    paylen = 4,
    next_hdr = 6,
    hop_limit = 7,
    sgid = 8,
    dgid = 24
);
assert_layout!(ibv_ece, 12);
assert_layout!(ibv_data_buf, 16, addr = 0, length = 8);
assert_layout!(ibv_sge, 16, addr = 0, length = 8, lkey = 12);
assert_layout!(
    ibv_send_wr,
    128,
    wr_id = 0,
    next = 8,
    sg_list = 16,
    num_sge = 24,
    opcode = 28,
    send_flags = 32,
    imm_data = 36,
    wr = 40,
    qp_type = 72,
    ext = 80
);
assert_layout!(
    ibv_send_wr_atomic,
    32,
    compare_add = 8,
    swap = 16,
    rkey = 24
);
assert_layout!(ibv_send_wr_ud, 16, remote_qpn = 8, remote_qkey = 12);
assert_layout!(ibv_mw_bind_info, 32);
assert_layout!(ibv_mw_bind, 48, send_flags = 8, bind_info = 16);
assert_layout!(ibv_send_wr_bind_mw, 48, rkey = 8, bind_info = 16);
assert_layout!(
    ibv_recv_wr,
    32,
    wr_id = 0,
    next = 8,
    sg_list = 16,
    num_sge = 24
);
assert_layout!(
    ibv_wc,
    48,
    wr_id = 0,
    status = 8,
    opcode = 12,
    vendor_err = 16,
    byte_len = 20,
    imm_data = 24,
    qp_num = 28,
    src_qp = 32,
    wc_flags = 36,
    pkey_index = 40,
    slid = 42,
    sl = 44,
    dlid_path_bits = 45
);
assert_layout!(ibv_async_event, 16, element = 0, event_type = 8);

/// What a program can see of our allocation in front of `struct ibv_context`: v44's ops plus
/// room for the newer ones, all of which we leave NULL.
pub const VERBS_CONTEXT_ALLOC_SZ: usize =
    size_of::<verbs_context>() + VERBS_CONTEXT_HEAD_EXTRA_OPS * size_of::<usize>();
const _: () = assert!(VERBS_CONTEXT_ALLOC_SZ == 696);
