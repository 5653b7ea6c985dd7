/* Shared by the C test programs (verbs and RDMA CM): includes, the CHECK macro and done(), and
 * helpers that open the first device, bring a QP to RTS, wait for one completion and create an
 * RC QP. Static
 * definitions: include it from one .c file (compiled with -Wno-unused-function). */
#ifndef ROCE_VERBS_SETUP_H
#define ROCE_VERBS_SETUP_H
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int failures;

#define CHECK(name, cond, ...)                                                  \
	do {                                                                        \
		if (cond) {                                                             \
			printf("CHECK %s ok\n", name);                                      \
		} else {                                                                \
			printf("CHECK %s FAIL: ", name);                                    \
			printf(__VA_ARGS__);                                                \
			printf("\n");                                                       \
			failures++;                                                         \
		}                                                                       \
		fflush(stdout);                                                         \
	} while (0)

/* The closing line the Rust side looks for; the exit status: 0 iff no check failed. */
static int done(void)
{
	printf("DONE failures %d\n", failures);
	fflush(stdout);
	return failures ? 1 : 0;
}

/* ibv_qp_attr.timeout of to_rts (4.096 us << n; 10: about 4 ms per try, retry_cnt 3). */
static int rts_timeout = 10;

/* INIT -> RTR -> RTS toward QP `dest` at `gid`, the peer allowed `access` on this QP. */
static int to_rts_access(struct ibv_qp *qp, union ibv_gid *gid, uint32_t dest, int access)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = access;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return 1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return 2;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = rts_timeout;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return 3;
	return 0;
}

static int to_rts(struct ibv_qp *qp, union ibv_gid *gid, uint32_t dest)
{
	return to_rts_access(qp, gid, dest, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
}

/* Polls until one completion arrives (2 s). Returns 1 with *wc filled. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long i = 0; i < 2000000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n != 0)
			return n;
	}
	return 0;
}

/* An RC QP completing sends on scq and receives on rcq, every send signalled, with room for
 * `wrs` WRs of `sges` SGEs in each queue. */
static struct ibv_qp *new_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, int wrs,
                                int sges)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = wrs;
	ia.cap.max_recv_wr = wrs;
	ia.cap.max_send_sge = sges;
	ia.cap.max_recv_sge = sges;
	return ibv_create_qp(pd, &ia);
}

static struct ibv_qp *new_qp(struct ibv_pd *pd, struct ibv_cq *cq, int sges)
{
	return new_rc_qp(pd, cq, cq, 16, sges);
}

/* Opens the first device and reads its GID index 1 (the address) into *gid; without a device
 * prints "no device" or "open failed" and exits with status 2. */
static struct ibv_context *open_first_device(union ibv_gid *gid)
{
	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || num < 1) {
		printf("no device\n");
		exit(2);
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx) {
		printf("open failed\n");
		exit(2);
	}
	ibv_free_device_list(list);
	ibv_query_gid(ctx, 1, 1, gid);
	return ctx;
}
#endif
