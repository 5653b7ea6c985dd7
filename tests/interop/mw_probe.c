/*
 * mw_probe: memory windows across the wire (issue 22 item 1), between two RoCE NICs over two RC
 * QPs. The interop matrix (tests/interop/run-matrix.sh, block "mw") runs it with the emulator
 * on one side and kernel rxe on the other, both ways.
 *
 *   mw_probe [-d DEV] [-g GID_INDEX] [-i PORT] [-m MTU] [-p TCP_PORT] [-t SECS] -x rxe|emu            owner
 *   mw_probe [same options] OWNER_IP                                                                  accessor
 *
 * -x names the implementation of the window OWNER (the responder), on both sides: it decides what
 * is expected where kernel rxe and the emulator differ (an access past the window's end inside
 * the region, emu/README.md deviation 22). Everything else is expected of both alike.
 *
 * The owner registers 32 KiB with LOCAL_WRITE | MW_BIND only (no remote access of its own), fills
 * it with a guard byte and binds two windows with REMOTE_WRITE | REMOTE_READ:
 *   W2, type 2 (ibv_alloc_mw + IBV_WR_BIND_MW on QP a, key byte ibv_inc_rkey), 8 KiB at 8192;
 *   W1, type 1 (ibv_alloc_mw + ibv_bind_mw on QP a),                           4 KiB at 20480,
 * and sends each window's rkey, address and length over TCP (port 18515). QP numbers, PSNs and
 * GIDs go the same way; retry_cnt is 6 (kernel rxe retries forever at 7). The accessor, in steps
 * the two sides agree on over TCP:
 *   1. WRITE 8 KiB through W2 (QP a), READ it back, compare; WRITE 4 KiB through W1 from QP b
 *      (a type 1 window is not tied to a QP), READ it back through QP a, compare. The owner
 *      checks both windows hold the data and every byte around them is still the guard byte.
 *   2. SEND with invalidate of W2's rkey (QP a). The owner's receive completion must be
 *      IBV_WC_RECV, success, byte_len 32, the rkey in invalidated_rkey and the WITH_INV flag
 *      (IBV_WC_WITH_INV; kernel rxe's user CQ carries the kernel's IB_WC_WITH_INVALIDATE bit
 *      instead, 0x4 = IBV_WC_IP_CSUM_OK: accepted with -x rxe, and printed).
 *   3. WRITE through W2's invalidated rkey (QP a): the accessor's completion must be
 *      IBV_WC_REM_ACCESS_ERR and its QP in ERR; the owner's window must be unchanged and its QP a
 *      in ERR (responder class C error); its second receive, if flushed, is printed.
 *   4. WRITE 64 bytes at W1's end - 32 through W1 (QP b), 32 bytes inside the region past the
 *      window: with -x rxe (rxe checks the region's bounds) it must succeed and the owner sees
 *      the 64 bytes; with -x emu (the window's bounds) IBV_WC_REM_ACCESS_ERR and nothing written.
 * Prints "CHECK name ok|FAIL detail" per check and a closing "mw_probe: result: ..." line; exit
 * status 0 only if every check passed. Build: gcc -O2 -Wall -o mw_probe mw_probe.c -libverbs
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF 32768
#define W2_OFF 8192
#define W2_LEN 8192
#define W1_OFF 20480
#define W1_LEN 4096
#define RECV_LEN 64
#define INV_LEN 32
#define PAST 32 /* bytes of step 4's WRITE past W1's end */
#define GUARD 0xa5
#define REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
/* The kernel's IB_WC_WITH_INVALIDATE (include/rdma/ib_verbs.h), which libibverbs numbers
 * IBV_WC_IP_CSUM_OK: what rxe's user CQ reports for a SEND with invalidate. */
#define KERNEL_WC_WITH_INVALIDATE 0x4

struct qpinfo {
	uint32_t qpn[2], psn;
	uint8_t gid[16];
};
struct wininfo {
	uint32_t rkey2, len2, rkey1, len1;
	uint64_t addr2, addr1;
};

static const char *prog = "mw_probe";
static int timeout_s = 60, failures;

#define FAIL(...) do { fprintf(stderr, "%s: ", prog); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static void check(const char *name, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;
	printf("CHECK %s %s", name, ok ? "ok" : "FAIL");
	if (fmt && *fmt) {
		fputs(" (", stdout);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		fputc(')', stdout);
	}
	fputc('\n', stdout);
	failures += !ok;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static unsigned char pat(size_t k, int tag) { return (unsigned char)(k * 7 + tag * 31 + 1); }
static void fill(unsigned char *p, size_t n, int tag)
{
	for (size_t k = 0; k < n; k++)
		p[k] = pat(k, tag);
}
/* First k in [0, n) where p[k] is not pattern tag (tag < 0: not the guard byte); n if none. */
static size_t diff(const unsigned char *p, size_t n, int tag)
{
	for (size_t k = 0; k < n; k++)
		if (p[k] != (tag < 0 ? GUARD : pat(k, tag)))
			return k;
	return n;
}

static void xfer(int fd, void *buf, size_t n, int send_)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = send_ ? write(fd, (char *)buf + done, n - done) : read(fd, (char *)buf + done, n - done);
		if (r <= 0)
			FAIL("TCP %s failed: %s", send_ ? "write" : "read", r ? strerror(errno) : "peer closed");
		done += r;
	}
}
/* One step of the lockstep: each side says it is done with `step`, then waits for the other. */
static void sync_step(int fd, char step)
{
	char got;
	xfer(fd, &step, 1, 1);
	xfer(fd, &got, 1, 0);
	if (got != step)
		FAIL("peer is at step %c, we are at %c", got, step);
}

static int tcp_connect(const char *host, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		FAIL("bad owner address %s (IPv4 literal expected)", host);
	for (int tries = 0; tries < 50; tries++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
			return fd;
		close(fd);
		usleep(100000);
	}
	FAIL("cannot connect to %s:%d", host, port);
}

static int tcp_accept(int port)
{
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1))
		FAIL("cannot listen on TCP %d: %s", port, strerror(errno));
	int fd = accept(ls, NULL, NULL);
	if (fd < 0)
		FAIL("accept: %s", strerror(errno));
	close(ls);
	return fd;
}

static enum ibv_mtu mtu_enum(int m)
{
	switch (m) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	}
	FAIL("bad MTU %d", m);
}

/* The next completion of cq within `secs` (0: none came). */
static int poll_for(struct ibv_cq *cq, struct ibv_wc *wc, double secs)
{
	double deadline = now() + secs;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			FAIL("ibv_poll_cq failed");
		if (n == 1)
			return 1;
		if (now() > deadline)
			return 0;
		usleep(200);
	}
}
static void poll_one(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	if (!poll_for(cq, wc, timeout_s))
		FAIL("timed out after %d s waiting for %s", timeout_s, what);
}
static void poll_ok(struct ibv_cq *cq, struct ibv_wc *wc, uint64_t id, const char *what)
{
	poll_one(cq, wc, what);
	if (wc->status != IBV_WC_SUCCESS || wc->wr_id != id)
		FAIL("%s: status %s (%d), wr_id %#llx (expected %#llx)", what, ibv_wc_status_str(wc->status),
		     wc->status, (unsigned long long)wc->wr_id, (unsigned long long)id);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		FAIL("ibv_query_qp failed: %s", strerror(errno));
	return a.qp_state;
}

static void to_rts(struct ibv_qp *qp, const struct qpinfo *me, const struct qpinfo *peer, int which,
		   int gidx, int ib_port, int mtu)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu_enum(mtu);
	a.dest_qp_num = peer->qpn[which];
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = ib_port;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("modify QP to RTR failed: %s", strerror(errno));
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 6; /* not 7: kernel rxe treats 7 as "retry forever" */
	a.rnr_retry = 6;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("modify QP to RTS failed: %s", strerror(errno));
}

static struct ibv_mr *mr;
static unsigned char *buf;

/* Accessor: one RDMA WRITE/READ of len bytes at buf + off to raddr behind rkey on qp; status. */
static int rdma(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, size_t off, uint32_t len,
		uint64_t raddr, uint32_t rkey, const char *what)
{
	struct ibv_sge s = { .addr = (uintptr_t)buf + off, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0xa0, .sg_list = &s, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		FAIL("ibv_post_send (%s) failed: %s", what, strerror(errno));
	poll_one(cq, &wc, what);
	if (wc.wr_id != 0xa0)
		FAIL("%s: completion of wr_id %#llx", what, (unsigned long long)wc.wr_id);
	return wc.status;
}

int main(int argc, char **argv)
{
	const char *devname = NULL, *owner_ip = NULL, *x = NULL;
	int gidx = 1, ib_port = 1, port = 18515, mtu = 1024, c;
	while ((c = getopt(argc, argv, "d:g:i:m:p:t:x:")) != -1) {
		switch (c) {
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'i': ib_port = atoi(optarg); break;
		case 'm': mtu = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 't': timeout_s = atoi(optarg); break;
		case 'x': x = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-d dev] [-g gid_index] [-i ib_port] [-m mtu] [-p tcp_port] [-t secs] -x rxe|emu [owner_ip]\n", prog);
			return 2;
		}
	}
	if (!x || (strcmp(x, "rxe") && strcmp(x, "emu")))
		FAIL("-x rxe|emu (the owner's implementation) is required");
	int owner_rxe = !strcmp(x, "rxe");
	if (optind < argc)
		owner_ip = argv[optind];
	int owner = !owner_ip;
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(timeout_s + 30); /* a hard bound whatever blocks */

	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	if (!list || ndev == 0)
		FAIL("no RDMA device");
	for (int k = 0; k < ndev; k++)
		if (!devname || !strcmp(ibv_get_device_name(list[k]), devname)) {
			dev = list[k];
			break;
		}
	if (!dev)
		FAIL("device %s not found", devname);
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		FAIL("ibv_open_device failed");
	struct ibv_device_attr da;
	if (ibv_query_device(ctx, &da))
		FAIL("ibv_query_device failed");
	printf("%s: %s on %s, device_cap_flags %#x, max_mw %d\n", prog, owner ? "owner" : "accessor",
	       ibv_get_device_name(dev), da.device_cap_flags, da.max_mw);
	if (owner)
		check("device reports MEM_WINDOW and MEM_WINDOW_TYPE_2B",
		      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
			      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && da.max_mw > 0,
		      "flags %#x max_mw %d", da.device_cap_flags, da.max_mw);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd || posix_memalign((void **)&buf, 4096, BUF))
		FAIL("ibv_alloc_pd / memory failed");
	memset(buf, GUARD, BUF);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | (owner ? IBV_ACCESS_MW_BIND : 0));
	struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0), *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!mr || !scq || !rcq)
		FAIL("ibv_reg_mr / ibv_create_cq failed: %s", strerror(errno));
	struct ibv_qp *qp[2];
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	for (int k = 0; k < 2; k++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = ib_port, .qp_access_flags = REMOTE };
		qp[k] = ibv_create_qp(pd, &ia);
		if (!qp[k] || ibv_modify_qp(qp[k], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			FAIL("ibv_create_qp / INIT failed: %s", strerror(errno));
	}
	if (owner) /* the SEND with invalidate's, and one to be flushed when QP a goes to ERR */
		for (uint64_t k = 0; k < 2; k++) {
			struct ibv_sge s = { .addr = (uintptr_t)buf + k * RECV_LEN, .length = RECV_LEN, .lkey = mr->lkey };
			struct ibv_recv_wr rwr = { .wr_id = 0x100 + k, .sg_list = &s, .num_sge = 1 }, *bad;
			if (ibv_post_recv(qp[0], &rwr, &bad))
				FAIL("ibv_post_recv failed");
		}

	struct qpinfo me = { .qpn = { qp[0]->qp_num, qp[1]->qp_num },
			     .psn = (uint32_t)(getpid() * 2654435761u) & 0xffffff }, peer, w;
	union ibv_gid gid;
	if (ibv_query_gid(ctx, ib_port, gidx, &gid))
		FAIL("ibv_query_gid %d failed", gidx);
	memcpy(me.gid, gid.raw, 16);
	int fd = owner ? tcp_accept(port) : tcp_connect(owner_ip, port);
	w = me;
	w.qpn[0] = htonl(me.qpn[0]); w.qpn[1] = htonl(me.qpn[1]); w.psn = htonl(me.psn);
	xfer(fd, &w, sizeof w, 1);
	xfer(fd, &peer, sizeof peer, 0);
	peer.qpn[0] = ntohl(peer.qpn[0]); peer.qpn[1] = ntohl(peer.qpn[1]); peer.psn = ntohl(peer.psn);
	for (int k = 0; k < 2; k++)
		to_rts(qp[k], &me, &peer, k, gidx, ib_port, mtu);
	sync_step(fd, 'R');

	struct wininfo win;
	struct ibv_wc wc;
	struct ibv_mw *mw2 = NULL, *mw1 = NULL;
	if (owner) {
		/* W2: type 2, IBV_WR_BIND_MW with the next key byte */
		mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
		if (!mw2 || !mw1)
			FAIL("ibv_alloc_mw failed: %s", strerror(errno));
		uint32_t k2 = ibv_inc_rkey(mw2->rkey);
		struct ibv_send_wr bw = { .wr_id = 0xb2, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED }, *bad;
		bw.bind_mw.mw = mw2;
		bw.bind_mw.rkey = k2;
		bw.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)buf + W2_OFF,
								  .length = W2_LEN, .mw_access_flags = REMOTE };
		if (ibv_post_send(qp[0], &bw, &bad))
			FAIL("IBV_WR_BIND_MW: ibv_post_send failed: %s", strerror(errno));
		poll_one(scq, &wc, "the type 2 bind");
		check("type 2 window bound by IBV_WR_BIND_MW", wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
		      "status %d opcode %d", wc.status, wc.opcode);
		mw2->rkey = k2;
		/* W1: type 1, ibv_bind_mw (increments mw->rkey's key byte) */
		uint32_t old1 = mw1->rkey;
		struct ibv_mw_bind mb = { .wr_id = 0xb1, .send_flags = IBV_SEND_SIGNALED,
					  .bind_info = { .mr = mr, .addr = (uintptr_t)buf + W1_OFF, .length = W1_LEN,
							 .mw_access_flags = REMOTE } };
		int r = ibv_bind_mw(qp[0], mw1, &mb);
		if (r)
			FAIL("ibv_bind_mw failed: %s", strerror(r));
		poll_one(scq, &wc, "the type 1 bind");
		check("type 1 window bound by ibv_bind_mw", wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW &&
								    mw1->rkey == ibv_inc_rkey(old1),
		      "status %d opcode %d rkey %#x (was %#x)", wc.status, wc.opcode, mw1->rkey, old1);
		printf("%s: W2 rkey %#x at %p+%d, W1 rkey %#x at %p+%d, region lkey %#x rkey %#x\n", prog, mw2->rkey,
		       (void *)(buf + W2_OFF), W2_LEN, mw1->rkey, (void *)(buf + W1_OFF), W1_LEN, mr->lkey, mr->rkey);
		win = (struct wininfo){ .rkey2 = htonl(mw2->rkey), .len2 = htonl(W2_LEN), .rkey1 = htonl(mw1->rkey),
					.len1 = htonl(W1_LEN), .addr2 = htobe64((uintptr_t)buf + W2_OFF),
					.addr1 = htobe64((uintptr_t)buf + W1_OFF) };
		xfer(fd, &win, sizeof win, 1);
	} else {
		xfer(fd, &win, sizeof win, 0);
	}
	uint32_t rkey2 = ntohl(win.rkey2), rkey1 = ntohl(win.rkey1), len2 = ntohl(win.len2), len1 = ntohl(win.len1);
	uint64_t addr2 = be64toh(win.addr2), addr1 = be64toh(win.addr1);
	char wr2[64], past[64], inv[64];
	int st;

	/* 1. WRITE and READ through both windows */
	if (!owner) {
		if (len2 > BUF / 2 || len1 > BUF / 2)
			FAIL("window lengths %u / %u too large", len2, len1);
		fill(buf, len2, 2);
		st = rdma(qp[0], scq, IBV_WR_RDMA_WRITE, 0, len2, addr2, rkey2, "WRITE through W2");
		check("WRITE through the type 2 window", st == IBV_WC_SUCCESS, "%u bytes, status %s", len2, ibv_wc_status_str(st));
		memset(buf + BUF / 2, 0, len2);
		st = rdma(qp[0], scq, IBV_WR_RDMA_READ, BUF / 2, len2, addr2, rkey2, "READ through W2");
		size_t d = diff(buf + BUF / 2, len2, 2);
		check("READ back through the type 2 window", st == IBV_WC_SUCCESS && d == len2, "status %s, first difference at %zu",
		      ibv_wc_status_str(st), d);
		fill(buf, len1, 1);
		st = rdma(qp[1], scq, IBV_WR_RDMA_WRITE, 0, len1, addr1, rkey1, "WRITE through W1");
		check("WRITE through the type 1 window from the other QP", st == IBV_WC_SUCCESS, "status %s", ibv_wc_status_str(st));
		memset(buf + BUF / 2, 0, len1);
		st = rdma(qp[0], scq, IBV_WR_RDMA_READ, BUF / 2, len1, addr1, rkey1, "READ through W1");
		d = diff(buf + BUF / 2, len1, 1);
		check("READ back through the type 1 window", st == IBV_WC_SUCCESS && d == len1, "status %s, first difference at %zu",
		      ibv_wc_status_str(st), d);
		sync_step(fd, '1');
	} else {
		sync_step(fd, '1');
		size_t d2 = diff(buf + W2_OFF, W2_LEN, 2), d1 = diff(buf + W1_OFF, W1_LEN, 1);
		size_t g0 = diff(buf + 2 * RECV_LEN, W2_OFF - 2 * RECV_LEN, -1), g1 = diff(buf + W2_OFF + W2_LEN, W1_OFF - W2_OFF - W2_LEN, -1),
		       g2 = diff(buf + W1_OFF + W1_LEN, BUF - W1_OFF - W1_LEN, -1);
		check("owner: both windows hold the data written, the rest of the region is untouched",
		      d2 == W2_LEN && d1 == W1_LEN && g0 == W2_OFF - 2 * RECV_LEN && g1 == W1_OFF - W2_OFF - W2_LEN &&
			      g2 == (size_t)BUF - W1_OFF - W1_LEN,
		      "W2 %zu/%d W1 %zu/%d, guard %zu %zu %zu", d2, W2_LEN, d1, W1_LEN, g0, g1, g2);
	}

	/* 2. SEND with invalidate of W2's rkey */
	if (!owner) {
		fill(buf, INV_LEN, 3);
		struct ibv_sge s = { .addr = (uintptr_t)buf, .length = INV_LEN, .lkey = mr->lkey };
		struct ibv_send_wr sw = { .wr_id = 0xa1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
					  .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = rkey2 }, *bad;
		if (ibv_post_send(qp[0], &sw, &bad))
			FAIL("IBV_WR_SEND_WITH_INV: ibv_post_send failed: %s", strerror(errno));
		poll_one(scq, &wc, "the SEND with invalidate");
		check("SEND with invalidate of the type 2 window's rkey completes", wc.status == IBV_WC_SUCCESS && wc.wr_id == 0xa1 &&
											wc.opcode == IBV_WC_SEND,
		      "status %s opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
		snprintf(inv, sizeof inv, "SEND_WITH_INV %s", ibv_wc_status_str(wc.status));
		sync_step(fd, '2');
	} else {
		poll_ok(rcq, &wc, 0x100, "the SEND with invalidate's receive");
		int flag = (wc.wc_flags & IBV_WC_WITH_INV) ||
			   (owner_rxe && (wc.wc_flags & KERNEL_WC_WITH_INVALIDATE));
		check("owner: receive completion of the SEND with invalidate: RECV, byte_len, invalidated_rkey, WITH_INV flag",
		      wc.opcode == IBV_WC_RECV && wc.byte_len == INV_LEN && wc.invalidated_rkey == mw2->rkey && flag &&
			      diff(buf, INV_LEN, 3) == INV_LEN,
		      "opcode %d byte_len %u invalidated_rkey %#x (W2 %#x) wc_flags %#x: %s", wc.opcode, wc.byte_len,
		      wc.invalidated_rkey, mw2->rkey, wc.wc_flags,
		      (wc.wc_flags & IBV_WC_WITH_INV) ? "IBV_WC_WITH_INV" :
		      (wc.wc_flags & KERNEL_WC_WITH_INVALIDATE) ? "the kernel's IB_WC_WITH_INVALIDATE bit (0x4), not IBV_WC_WITH_INV" :
								  "no invalidate flag");
		snprintf(inv, sizeof inv, "WITH_INV flags %#x", wc.wc_flags);
		sync_step(fd, '2');
	}

	/* 3. WRITE through the invalidated rkey */
	if (!owner) {
		fill(buf, 64, 4);
		st = rdma(qp[0], scq, IBV_WR_RDMA_WRITE, 0, 64, addr2, rkey2, "WRITE through the invalidated W2");
		enum ibv_qp_state s = qp_state(qp[0]);
		check("WRITE through the invalidated rkey: remote access error, QP in ERR", st == IBV_WC_REM_ACCESS_ERR && s == IBV_QPS_ERR,
		      "status %s, QP state %d", ibv_wc_status_str(st), s);
		snprintf(wr2, sizeof wr2, "after invalidation %s", ibv_wc_status_str(st));
		sync_step(fd, '3');
	} else {
		sync_step(fd, '3');
		enum ibv_qp_state s = qp_state(qp[0]);
		size_t d2 = diff(buf + W2_OFF, W2_LEN, 2);
		int flushed = poll_for(rcq, &wc, 2.0);
		check("owner: window unchanged by the refused WRITE, QP in ERR", d2 == W2_LEN && s == IBV_QPS_ERR,
		      "W2 %zu/%d, QP state %d; its other receive: %s", d2, W2_LEN, s,
		      flushed ? ibv_wc_status_str(wc.status) : "no completion within 2 s");
		snprintf(wr2, sizeof wr2, "QP %s, 2nd recv %s", s == IBV_QPS_ERR ? "ERR" : "not ERR",
			 flushed ? ibv_wc_status_str(wc.status) : "not flushed");
	}

	/* 4. WRITE 64 bytes straddling W1's end: PAST bytes beyond the window, inside the region */
	if (!owner) {
		fill(buf, 64, 5);
		st = rdma(qp[1], scq, IBV_WR_RDMA_WRITE, 0, 64, addr1 + len1 - (64 - PAST), rkey1, "WRITE past W1's end");
		int want = owner_rxe ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR;
		check(owner_rxe ? "WRITE past the window's end, inside the region: succeeds (rxe checks the region's bounds)"
				: "WRITE past the window's end, inside the region: remote access error (the window's bounds)",
		      st == want, "status %s", ibv_wc_status_str(st));
		snprintf(past, sizeof past, "past the end %s", ibv_wc_status_str(st));
		sync_step(fd, '4');
	} else {
		sync_step(fd, '4');
		const unsigned char *p = buf + W1_OFF + W1_LEN - (64 - PAST);
		size_t dw = diff(p, 64, 5), din = diff(buf + W1_OFF, W1_LEN, 1), dg = diff(p + 64 - PAST, PAST, -1);
		int written = dw == 64, untouched = din == W1_LEN && dg == PAST;
		check(owner_rxe ? "owner: the WRITE past the window's end landed, 32 bytes beyond the window"
				: "owner: nothing written by the WRITE past the window's end",
		      owner_rxe ? written : untouched, "%s", written ? "64 bytes written" : untouched ? "untouched" : "partly written");
		snprintf(past, sizeof past, "past the end %s", written ? "written" : untouched ? "refused" : "PARTLY written");
	}

	sync_step(fd, 'E');
	close(fd);
	printf("%s: result: %s; %s; %s; %s\n", prog, failures ? "FAILED" : "all checks ok", inv, wr2, past);
	ibv_destroy_qp(qp[0]);
	ibv_destroy_qp(qp[1]);
	if (mw2)
		ibv_dealloc_mw(mw2);
	if (mw1)
		ibv_dealloc_mw(mw1);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return failures ? 1 : 0;
}
