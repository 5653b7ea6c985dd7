/* What a program sees of the device where kernel rxe fails loudly or fills fields (issue 20,
 * item 3). Prints "KEY value" lines only, no verdicts: provider/cli/tests/fidelity.rs runs it on the
 * roce drop-in libibverbs.so.1 (`roce run --ip 127.0.0.1`) and checks the values; the same
 * binary runs unchanged on kernel rxe in the qemu lab (tests/interop), which is where the
 * expected values come from.
 *
 *   dev ...                      vendor_id, vendor_part_id, hw_ver, device_cap_flags
 *   gid <i> <gid>                the populated GIDs (until the first empty one, at most 4)
 *   rtr <case> <errno>           ibv_modify_qp INIT -> RTR of an RC QP with a bad or good AV
 *   ah <case> <errno>            ibv_create_ah with the same AVs
 *   ud_recv ...                  the receive completion of a UD SEND to itself (sgid 1)
 *   rc_recv ...                  the receive completion of an RC SEND to itself (sgid 1)
 *   send_ops <qpt> <bit> <errno> ibv_create_qp_ex with one IBV_QP_EX_WITH_* bit
 *   ll <what> ...                an RC QP connected to itself over GID 0 (fe80::), if allowed
 *   unroutable ...               (with `--unroutable`) UD sends to 192.0.2.1 from loopback
 *   retry_exceeded status <s>    an RC SEND to a QP number nobody has, retry_cnt 1
 *   QPN <case> <qp_num>          the QP a `roce:` line is expected for
 * Usage: fidelity [DEVICE [--unroutable]] (DEVICE "-": the first device).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gids[4];
static int ngids;

static void print_gid(const char *key, int i, const union ibv_gid *g)
{
	char s[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, g->raw, s, sizeof s);
	printf("%s %d %s\n", key, i, s);
}

static struct ibv_qp *qp_of(enum ibv_qp_type t)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = t;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &ia);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	}
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* An address vector: is_global, port, sgid index, destination GID. */
static struct ibv_ah_attr av(int global, int port, int sgid, const union ibv_gid *dgid)
{
	struct ibv_ah_attr a;
	memset(&a, 0, sizeof a);
	a.is_global = global;
	a.port_num = port;
	a.grh.sgid_index = sgid;
	a.grh.hop_limit = 64;
	if (dgid)
		a.grh.dgid = *dgid;
	return a;
}

static int to_rtr(struct ibv_qp *qp, struct ibv_ah_attr ah, uint32_t dest)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr = ah;
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (qp->qp_type == IBV_QPT_RC)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return ibv_modify_qp(qp, &a, mask);
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	if (qp->qp_type == IBV_QPT_UD)
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	                     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Polls until a completion of QP `qpn` on the send (`recv` 0) or receive side arrives (an
 * error completion of either side counts), about 2 s at most; others are dropped. */
static int wait_wc(struct ibv_wc *wc, int recv, uint32_t qpn)
{
	for (long i = 0; i < 4000000; i++) {
		if (ibv_poll_cq(cq, 1, wc) == 1 && wc->qp_num == qpn &&
		    (!!(wc->opcode & IBV_WC_RECV) == recv || wc->status))
			return 1;
	}
	return 0;
}

static void print_wc(const char *key, int n, const struct ibv_wc *wc, uint32_t qpn)
{
	if (!n) {
		printf("%s none\n", key);
		return;
	}
	printf("%s status=%d opcode=%d byte_len=%u wc_flags=0x%x sl=%u pkey_index=%u slid=%u "
	       "dlid_path_bits=%u src_qp_is_self=%d imm=0x%x\n",
	       key, wc->status, wc->opcode, wc->byte_len, wc->wc_flags, wc->sl, wc->pkey_index, wc->slid,
	       wc->dlid_path_bits, wc->src_qp == qpn, ntohl(wc->imm_data));
}

/* A SEND with immediate from `qp` to itself (UD through `ah`), and the completions' fields. */
static void send_self(const char *key, struct ibv_qp *qp, struct ibv_ah *ah, char *buf, struct ibv_mr *mr)
{
	struct ibv_sge rs = {.addr = (uintptr_t)buf, .length = 1024, .lkey = mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *rbad;
	struct ibv_sge ss = {.addr = (uintptr_t)buf + 2048, .length = 16, .lkey = mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = 2;
	wr.sg_list = &ss;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(0x1234);
	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qp->qp_num;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	int r = ibv_post_recv(qp, &rwr, &rbad);
	r |= ibv_post_send(qp, &wr, &bad);
	if (r) {
		printf("%s post %d\n", key, r);
		return;
	}
	int n = wait_wc(&wc, 1, qp->qp_num);
	print_wc(key, n, &wc, qp->qp_num);
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
}

static const struct {
	const char *name;
	uint64_t bit;
} ops[] = {
	{"RDMA_WRITE", IBV_QP_EX_WITH_RDMA_WRITE},
	{"RDMA_WRITE_WITH_IMM", IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM},
	{"SEND", IBV_QP_EX_WITH_SEND},
	{"SEND_WITH_IMM", IBV_QP_EX_WITH_SEND_WITH_IMM},
	{"RDMA_READ", IBV_QP_EX_WITH_RDMA_READ},
	{"ATOMIC_CMP_AND_SWP", IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP},
	{"ATOMIC_FETCH_AND_ADD", IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD},
	{"LOCAL_INV", IBV_QP_EX_WITH_LOCAL_INV},
	{"BIND_MW", IBV_QP_EX_WITH_BIND_MW},
	{"SEND_WITH_INV", IBV_QP_EX_WITH_SEND_WITH_INV},
	{"TSO", IBV_QP_EX_WITH_TSO},
	{"FLUSH", 1 << 11},
	{"ATOMIC_WRITE", IBV_QP_EX_WITH_ATOMIC_WRITE},
};

static void send_ops(void)
{
	static const struct {
		const char *name;
		enum ibv_qp_type t;
	} types[] = {{"RC", IBV_QPT_RC}, {"UC", IBV_QPT_UC}, {"UD", IBV_QPT_UD}};
	for (unsigned t = 0; t < 3; t++) {
		for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++) {
			struct ibv_qp_init_attr_ex ia;
			memset(&ia, 0, sizeof ia);
			ia.send_cq = cq;
			ia.recv_cq = cq;
			ia.qp_type = types[t].t;
			ia.cap.max_send_wr = 4;
			ia.cap.max_recv_wr = 4;
			ia.cap.max_send_sge = 1;
			ia.cap.max_recv_sge = 1;
			ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			ia.pd = pd;
			ia.send_ops_flags = ops[i].bit;
			errno = 0;
			struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ia);
			printf("send_ops %s %s %d\n", types[t].name, ops[i].name, qp ? 0 : errno);
			if (qp)
				ibv_destroy_qp(qp);
		}
	}
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 && strcmp(argv[1], "-") ? argv[1] : NULL;
	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && i < num; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]), name))
			dev = list[i];
	if (!dev || !(ctx = ibv_open_device(dev))) {
		printf("no device\n");
		return 2;
	}
	struct ibv_device_attr da;
	if (ibv_query_device(ctx, &da)) {
		printf("query_device failed\n");
		return 2;
	}
	printf("dev vendor_id=0x%x vendor_part_id=%u hw_ver=0x%x device_cap_flags=0x%x atomic_cap=%d\n",
	       da.vendor_id, da.vendor_part_id, da.hw_ver, da.device_cap_flags, da.atomic_cap);
	for (ngids = 0; ngids < 4; ngids++) {
		if (ibv_query_gid(ctx, 1, ngids, &gids[ngids]))
			break;
		static const union ibv_gid zero;
		if (!memcmp(&gids[ngids], &zero, sizeof zero))
			break;
		print_gid("gid", ngids, &gids[ngids]);
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!pd || !cq || !mr || ngids < 2) {
		printf("setup failed\n");
		return 2;
	}
	const union ibv_gid *ll = &gids[0], *ip = &gids[1];
	struct {
		const char *name;
		struct ibv_ah_attr a;
	} cases[] = {
		{"no_grh", av(0, 1, 0, NULL)},
		{"no_grh_ip_dgid", av(0, 1, 1, ip)},
		{"port0", av(1, 0, 1, ip)},
		{"port2", av(1, 2, 1, ip)},
		{"sgid0_ip_dgid", av(1, 1, 0, ip)},
		{"sgid1_ll_dgid", av(1, 1, 1, ll)},
		{"sgid1_zero_dgid", av(1, 1, 1, NULL)},
		{"sgid_empty", av(1, 1, ngids, ip)},
		{"sgid_past_table", av(1, 1, 255, ip)},
		{"sgid0_ll_dgid", av(1, 1, 0, ll)},
		{"good", av(1, 1, 1, ip)},
	};
	for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct ibv_qp *qp = qp_of(IBV_QPT_RC);
		int r = qp ? to_init(qp) : -1;
		if (!r)
			r = to_rtr(qp, cases[i].a, qp->qp_num);
		printf("rtr %s %d\n", cases[i].name, r);
		if (qp)
			ibv_destroy_qp(qp);
	}
	struct ibv_qp *uc = qp_of(IBV_QPT_UC);
	int r = uc ? to_init(uc) : -1;
	printf("rtr uc_no_grh %d\n", r ? r : to_rtr(uc, av(0, 1, 0, NULL), uc->qp_num));
	for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		errno = 0;
		struct ibv_ah *ah = ibv_create_ah(pd, &cases[i].a);
		printf("ah %s %d\n", cases[i].name, ah ? 0 : errno);
		if (ah)
			ibv_destroy_ah(ah);
	}

	/* UD to itself over GID 1. */
	struct ibv_qp *ud = qp_of(IBV_QPT_UD);
	struct ibv_ah_attr ua = av(1, 1, 1, ip);
	struct ibv_ah *ah = ibv_create_ah(pd, &ua);
	if (ud && ah && !to_init(ud)) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
		if (!ibv_modify_qp(ud, &a, IBV_QP_STATE) && !to_rts(ud))
			send_self("ud_recv", ud, ah, buf, mr);
		else
			printf("ud_recv setup failed\n");
	}

	/* RC to itself over GID 1. */
	struct ibv_qp *rc = qp_of(IBV_QPT_RC);
	if (rc && !to_init(rc) && !to_rtr(rc, av(1, 1, 1, ip), rc->qp_num) && !to_rts(rc))
		send_self("rc_recv", rc, NULL, buf, mr);
	else
		printf("rc_recv setup failed\n");

	/* RC to itself over GID 0 (the link-local fe80:: GID), where the device allows it. */
	struct ibv_qp *l = qp_of(IBV_QPT_RC);
	r = to_init(l);
	if (!r)
		r = to_rtr(l, av(1, 1, 0, ll), l->qp_num);
	if (!r)
		r = to_rts(l);
	printf("ll setup %d\n", r);
	if (!r)
		send_self("ll_recv", l, NULL, buf, mr);

	send_ops();

	/* A UD send that cannot leave the host: 192.0.2.1 (TEST-NET-1) from a device on loopback.
	 * Only with an argument "--unroutable" (the lab's guests have a default route). */
	struct ibv_ah *far = NULL;
	if (argc > 2 && !strcmp(argv[2], "--unroutable")) {
		union ibv_gid g = {.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1}};
		struct ibv_ah_attr fa = av(1, 1, 1, &g);
		far = ibv_create_ah(pd, &fa);
		struct ibv_sge ss = {.addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey};
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;
		memset(&wr, 0, sizeof wr);
		wr.sg_list = &ss;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.wr.ud.ah = far;
		wr.wr.ud.remote_qpn = 1234;
		wr.wr.ud.remote_qkey = 0x11111111;
		for (int i = 0; i < 2; i++) {
			r = far ? ibv_post_send(ud, &wr, &bad) : -1;
			int n = !r && wait_wc(&wc, 0, ud->qp_num);
			printf("unroutable post %d %s\n", r, n ? "completed" : "no completion");
		}
		printf("QPN unroutable %u\n", ud->qp_num);
	}

	/* Retries exhausted: an RC QP connected to a QP number nobody has on this device. */
	struct ibv_qp *lost = qp_of(IBV_QPT_RC);
	r = to_init(lost);
	if (!r)
		r = to_rtr(lost, av(1, 1, 1, ip), 0xfffff0);
	if (!r) {
		struct ibv_qp_attr a;
		memset(&a, 0, sizeof a);
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 8;
		a.retry_cnt = 1;
		a.rnr_retry = 1;
		a.sq_psn = 1;
		a.max_rd_atomic = 1;
		r = ibv_modify_qp(lost, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	}
	if (!r) {
		struct ibv_sge ss = {.addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey};
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wc;
		memset(&wr, 0, sizeof wr);
		wr.sg_list = &ss;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		r = ibv_post_send(lost, &wr, &bad);
		int n = 0;
		for (int i = 0; !r && !n && i < 100; i++)
			n = wait_wc(&wc, 0, lost->qp_num);
		printf("retry_exceeded status %d\n", n ? (int)wc.status : -1);
		printf("QPN retry_exceeded %u\n", lost->qp_num);
	}

	/* Everything destroyed, the device closed (ROCE_STATS_AT_CLOSE prints its counters). */
	struct ibv_qp *qps[] = {uc, ud, rc, l, lost};
	for (unsigned i = 0; i < sizeof qps / sizeof qps[0]; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);
	if (ah)
		ibv_destroy_ah(ah);
	if (far)
		ibv_destroy_ah(far);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
