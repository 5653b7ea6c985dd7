/* Diagnostics that teach: provokes each classic verbs mistake once on the roce drop-in
 * libibverbs.so.1 (all QPs on one NIC, connected to each other over UDP). Compiled and run by
 * provider/cli/tests/diagnose.rs through `roce run --ip 127.0.0.1`, which checks the one warning per
 * cause and QP on stderr and the counters of `roce stat` ($ROCE_STAT_CMD, run at the end).
 * Prints "QPN <mistake> <qp_num>" for the QP that should be warned about, and
 * "CHECK <name> ok|FAIL" for the status the program itself sees. */
#include <unistd.h>
#include "verbs_setup.h"

int main(void)
{
	union ibv_gid gid;
	struct ibv_context *ctx = open_first_device(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	char *buf = aligned_alloc(4096, 8192), *buf2 = aligned_alloc(4096, 4096), *buf3 = aligned_alloc(4096, 4096);
	memset(buf, 0x5a, 8192);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *mr2 = ibv_reg_mr(pd2, buf2, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *ro = ibv_reg_mr(pd, buf3, 4096, IBV_ACCESS_REMOTE_READ);
	CHECK("setup", pd && pd2 && cq && mr && mr2 && ro, "pd %p", (void *)pd);
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;
	int r, n;

	/* 1. A QP used in the wrong state: post_send and post_recv on a RESET QP (twice each: one
	 * warning per cause). */
	struct ibv_qp *q = new_qp(pd, cq, 1);
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	struct ibv_recv_wr rwr = {.sg_list = &sge, .num_sge = 1}, *rbad;
	for (int i = 0; i < 2; i++) {
		r = ibv_post_send(q, &wr, &bad);
		CHECK("post_send on RESET -> EINVAL", r == EINVAL, "ret %d", r);
		r = ibv_post_recv(q, &rwr, &rbad);
		CHECK("post_recv on RESET -> EINVAL", r == EINVAL, "ret %d", r);
	}
	printf("QPN wrong_state %u\n", q->qp_num);

	/* 2. RNR: a SEND to a QP with no receive posted (the receiver is warned). */
	struct ibv_qp *s = new_qp(pd, cq, 1), *d = new_qp(pd, cq, 1);
	r = to_rts(s, &gid, d->qp_num) | to_rts(d, &gid, s->qp_num);
	r |= ibv_post_send(s, &wr, &bad);
	n = wait_wc(cq, &wc);
	CHECK("send with no receive posted -> IBV_WC_RNR_RETRY_EXC_ERR", r == 0 && n == 1 && wc.status == IBV_WC_RNR_RETRY_EXC_ERR,
	      "ret %d n %d status %d", r, n, wc.status);
	printf("QPN rnr %u\n", d->qp_num);
	printf("QPN rnr_sender %u\n", s->qp_num);
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;

	/* 3-6. Remote access errors: each on a fresh pair; the responder is warned. */
	struct ibv_mr *gone = ibv_reg_mr(pd, buf2, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	uint32_t stale = gone ? gone->rkey : 0;
	ibv_dereg_mr(gone);
	struct {
		const char *name;
		uint64_t addr;
		uint32_t rkey;
		uint32_t len;
	} cases[] = {
		{"bad_rkey", (uintptr_t)buf, mr->rkey ^ 0x01000000u, 16},
		{"stale_rkey", (uintptr_t)buf2, stale, 16},
		{"out_of_bounds", (uintptr_t)buf + 8192 - 8, mr->rkey, 16},
		{"no_permission", (uintptr_t)buf3, ro->rkey, 16},
	};
	for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		s = new_qp(pd, cq, 1);
		d = new_qp(pd, cq, 1);
		r = to_rts(s, &gid, d->qp_num) | to_rts(d, &gid, s->qp_num);
		struct ibv_sge ls = {.addr = (uintptr_t)buf, .length = cases[i].len, .lkey = mr->lkey};
		memset(&wr, 0, sizeof wr);
		wr.sg_list = &ls;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = cases[i].addr;
		wr.wr.rdma.rkey = cases[i].rkey;
		r |= ibv_post_send(s, &wr, &bad);
		n = wait_wc(cq, &wc);
		CHECK(cases[i].name, r == 0 && n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "ret %d n %d status %d", r, n, wc.status);
		printf("QPN %s %u\n", cases[i].name, d->qp_num);
		while (ibv_poll_cq(cq, 1, &wc) > 0)
			;
	}

	/* 6b. Without permission on the QP: an atomic to a QP whose qp_access_flags (set by to_rts)
	 * lack IBV_ACCESS_REMOTE_ATOMIC. */
	s = new_qp(pd, cq, 1);
	d = new_qp(pd, cq, 1);
	r = to_rts(s, &gid, d->qp_num) | to_rts(d, &gid, s->qp_num);
	struct ibv_sge as = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &as;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = (uintptr_t)buf + 4096;
	wr.wr.atomic.rkey = mr->rkey;
	wr.wr.atomic.compare_add = 1;
	r |= ibv_post_send(s, &wr, &bad);
	n = wait_wc(cq, &wc);
	CHECK("atomic on a QP without REMOTE_ATOMIC -> IBV_WC_REM_INV_REQ_ERR", r == 0 && n == 1 && wc.status == IBV_WC_REM_INV_REQ_ERR,
	      "ret %d n %d status %d", r, n, wc.status);
	printf("QPN qp_access %u\n", d->qp_num);
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;

	/* 7. Objects from different PDs: an SGE with the lkey of another PD's MR (the sender is
	 * warned). */
	s = new_qp(pd, cq, 1);
	d = new_qp(pd, cq, 1);
	r = to_rts(s, &gid, d->qp_num) | to_rts(d, &gid, s->qp_num);
	struct ibv_sge wsge = {.addr = (uintptr_t)buf2, .length = 64, .lkey = mr2->lkey};
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &wsge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)buf;
	wr.wr.rdma.rkey = mr->rkey;
	r |= ibv_post_send(s, &wr, &bad);
	n = wait_wc(cq, &wc);
	CHECK("lkey of another PD -> IBV_WC_LOC_PROT_ERR", r == 0 && n == 1 && wc.status == IBV_WC_LOC_PROT_ERR, "ret %d n %d status %d", r, n, wc.status);
	printf("QPN wrong_pd %u\n", s->qp_num);
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;

	/* 8. Completions never polled: 8 signaled writes into a CQ of 2 entries. */
	struct ibv_cq *small = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	struct ibv_qp *o = new_qp(pd, small, 1);
	r = to_rts(o, &gid, o->qp_num);
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
	wr.wr.rdma.rkey = mr->rkey;
	for (int i = 0; i < 8; i++)
		r |= ibv_post_send(o, &wr, &bad);
	struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
	int ready = poll(&pfd, 1, 3000);
	CHECK("CQ overflow -> async event", r == 0 && ready == 1, "ret %d ready %d", r, ready);
	printf("QPN cq_overflow %u\n", o->qp_num);

	/* Let the statistics file catch up (written every 500 ms), then show `roce stat`. */
	fflush(stdout);
	usleep(1200 * 1000);
	const char *cmd = getenv("ROCE_STAT_CMD");
	if (cmd)
		r = system(cmd);
	printf("%d failures\n", failures);
	return failures ? 1 : 0;
}
