/*
 * imm_pingpong: RDMA WRITE with immediate and SEND with immediate, both ways, over one RC QP,
 * with a data and immediate check. Debian 12's perftest (4.5) has no option for either opcode,
 * so the interop matrix (tests/interop/run-matrix.sh, issue #5) uses this instead.
 *
 *   imm_pingpong [-d DEV] [-g GID_INDEX] [-i PORT] [-s SIZE] [-n ITERS] [-m MTU] [-p TCP_PORT]   server
 *   imm_pingpong [same options] SERVER_IP                                                           client
 *
 * QP numbers, PSNs, GIDs, buffer address and rkey are exchanged over TCP (default port 18515).
 * Iteration i, client first, then server the same way back:
 *   RDMA_WRITE_WITH_IMM  SIZE bytes of pattern(i, side, 'W') into the peer's write region,
 *                        imm = 0x57000000 | side << 16 | i (masked)
 *   SEND_WITH_IMM        SIZE bytes of pattern(i, side, 'S') into the peer's receive buffer,
 *                        imm = 0x53000000 | side << 16 | i
 * The receiver checks, in order: an IBV_WC_RECV_RDMA_WITH_IMM completion with IBV_WC_WITH_IMM,
 * the immediate and byte_len = SIZE, and the write region's contents; then an IBV_WC_RECV
 * completion with IBV_WC_WITH_IMM, the immediate, byte_len and the receive buffer's contents.
 * retry_cnt is 6 (kernel rxe retries forever at 7), and both sides wait for their own send
 * completions and then for each other over TCP before tearing the QP down, so a lost final ACK
 * is retransmitted instead of hanging a peer whose partner already left.
 * Build: gcc -O2 -Wall -o imm_pingpong imm_pingpong.c -libverbs
 * Exit status 0 only if every check passed. Prints "... usec/iter" on success.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define RX_DEPTH 16

struct info {
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	uint8_t gid[16];
};

static const char *prog = "imm_pingpong";
static int timeout_s = 120;

#define FAIL(...) do { fprintf(stderr, "%s: ", prog); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void pattern(unsigned char *p, size_t n, unsigned i, int side, char op)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (unsigned char)(k * 7 + i * 13 + side * 101 + op);
}

static size_t first_diff(const unsigned char *a, unsigned i, int side, char op, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (a[k] != (unsigned char)(k * 7 + i * 13 + side * 101 + op))
			return k;
	return n;
}

static uint32_t imm_of(char op, int side, unsigned i)
{
	return ((op == 'W') ? 0x57000000u : 0x53000000u) | ((uint32_t)side << 16) | (i & 0xffff);
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

static int tcp_connect(const char *host, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		FAIL("bad server address %s (IPv4 literal expected)", host);
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

/* Poll CQ for one completion, with a deadline. */
static void poll_one(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	double deadline = now() + timeout_s;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			FAIL("ibv_poll_cq failed waiting for %s", what);
		if (n == 1)
			break;
		if (now() > deadline)
			FAIL("timed out after %d s waiting for %s", timeout_s, what);
	}
	if (wc->status != IBV_WC_SUCCESS)
		FAIL("%s: completion status %s (%d), opcode %d, wr_id %llu", what,
		     ibv_wc_status_str(wc->status), wc->status, wc->opcode, (unsigned long long)wc->wr_id);
}

int main(int argc, char **argv)
{
	const char *devname = NULL, *server = NULL;
	int gidx = 1, ib_port = 1, iters = 100, port = 18515, mtu = 1024, c;
	size_t size = 4096;

	while ((c = getopt(argc, argv, "d:g:i:s:n:m:p:t:")) != -1) {
		switch (c) {
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'i': ib_port = atoi(optarg); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': iters = atoi(optarg); break;
		case 'm': mtu = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 't': timeout_s = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-d dev] [-g gid_index] [-i ib_port] [-s size] [-n iters] [-m mtu] [-p tcp_port] [-t timeout_s] [server_ip]\n", prog);
			return 2;
		}
	}
	if (optind < argc)
		server = argv[optind];
	if (size < 1 || iters < 1)
		FAIL("size and iters must be positive");
	int side = server ? 1 : 0; /* 1 = client */
	setvbuf(stdout, NULL, _IOLBF, 0);

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
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	/* Layout: [write region][recv buffer][send buffer: W part, S part] */
	size_t total = 4 * size;
	unsigned char *buf;
	if (posix_memalign((void **)&buf, 4096, total))
		FAIL("out of memory");
	memset(buf, 0, total);
	unsigned char *wregion = buf, *rbuf = buf + size, *sbuf_w = buf + 2 * size, *sbuf_s = buf + 3 * size;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, total, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!pd || !mr)
		FAIL("ibv_alloc_pd/ibv_reg_mr failed: %s", strerror(errno));
	struct ibv_cq *scq = ibv_create_cq(ctx, RX_DEPTH, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, RX_DEPTH, NULL, NULL, 0);
	if (!scq || !rcq)
		FAIL("ibv_create_cq failed");
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = RX_DEPTH, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		FAIL("ibv_create_qp failed: %s", strerror(errno));

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = ib_port,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("modify QP to INIT failed");

	/* Receives: every WRITE_WITH_IMM and SEND_WITH_IMM consumes one. */
	struct ibv_sge rsge = { .addr = (uintptr_t)rbuf, .length = size, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .sg_list = &rsge, .num_sge = 1 }, *bad_r;
	for (int k = 0; k < RX_DEPTH; k++)
		if (ibv_post_recv(qp, &rwr, &bad_r))
			FAIL("ibv_post_recv failed");

	struct info me = { .qpn = qp->qp_num, .psn = (uint32_t)(getpid() * 2654435761u) & 0xffffff,
			   .rkey = mr->rkey, .addr = (uintptr_t)wregion }, peer;
	union ibv_gid gid;
	if (ibv_query_gid(ctx, ib_port, gidx, &gid))
		FAIL("ibv_query_gid %d failed", gidx);
	memcpy(me.gid, gid.raw, 16);
	int fd = server ? tcp_connect(server, port) : tcp_accept(port);
	struct info wire = me;
	wire.qpn = htonl(me.qpn); wire.psn = htonl(me.psn); wire.rkey = htonl(me.rkey);
	wire.addr = htobe64(me.addr);
	xfer(fd, &wire, sizeof wire, 1);
	xfer(fd, &peer, sizeof peer, 0);
	peer.qpn = ntohl(peer.qpn); peer.psn = ntohl(peer.psn); peer.rkey = ntohl(peer.rkey);
	peer.addr = be64toh(peer.addr);

	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu_enum(mtu);
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = ib_port;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("modify QP to RTR failed");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 6; /* not 7: kernel rxe treats 7 as "retry forever" */
	a.rnr_retry = 7;
	a.sq_psn = me.psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("modify QP to RTS failed");
	/* Both QPs are ready before anyone sends. */
	char sync = 's';
	xfer(fd, &sync, 1, 1);
	xfer(fd, &sync, 1, 0);
	printf("%s: %s, local QPN 0x%06x PSN 0x%06x, remote QPN 0x%06x PSN 0x%06x, size %zu, iters %d, MTU %d\n",
	       prog, side ? "client" : "server", me.qpn, me.psn, peer.qpn, peer.psn, size, iters, mtu);

	struct ibv_wc wc;
	int posted_recvs = RX_DEPTH;
	unsigned long checks = 0;
	double t0 = now();
	for (int i = 0; i < iters; i++) {
		for (int turn = 0; turn < 2; turn++) {
			int sender = turn == 0 ? 1 : 0; /* client sends first */
			char what[128];
			if (sender == side) {
				pattern(sbuf_w, size, i, side, 'W');
				pattern(sbuf_s, size, i, side, 'S');
				struct ibv_sge s1 = { .addr = (uintptr_t)sbuf_w, .length = size, .lkey = mr->lkey };
				struct ibv_sge s2 = { .addr = (uintptr_t)sbuf_s, .length = size, .lkey = mr->lkey };
				struct ibv_send_wr w2 = { .wr_id = 2, .sg_list = &s2, .num_sge = 1,
							  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
							  .imm_data = htonl(imm_of('S', side, i)) };
				struct ibv_send_wr w1 = { .wr_id = 1, .next = &w2, .sg_list = &s1, .num_sge = 1,
							  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
							  .imm_data = htonl(imm_of('W', side, i)) };
				w1.wr.rdma.remote_addr = peer.addr;
				w1.wr.rdma.rkey = peer.rkey;
				struct ibv_send_wr *bad;
				if (ibv_post_send(qp, &w1, &bad))
					FAIL("ibv_post_send failed at iteration %d: %s", i, strerror(errno));
				for (int k = 1; k <= 2; k++) {
					snprintf(what, sizeof what, "send completion %d of iteration %d", k, i);
					poll_one(scq, &wc, what);
					enum ibv_wc_opcode want = wc.wr_id == 1 ? IBV_WC_RDMA_WRITE : IBV_WC_SEND;
					if (wc.wr_id != (uint64_t)k || wc.opcode != want)
						FAIL("%s: wr_id %llu opcode %d, expected wr_id %d opcode %d", what,
						     (unsigned long long)wc.wr_id, wc.opcode, k, want);
				}
			} else {
				int peer_side = !side;
				/* 1: the WRITE_WITH_IMM */
				snprintf(what, sizeof what, "RDMA_WRITE_WITH_IMM of iteration %d", i);
				poll_one(rcq, &wc, what);
				posted_recvs--;
				if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM))
					FAIL("%s: opcode %d flags 0x%x, expected IBV_WC_RECV_RDMA_WITH_IMM with IBV_WC_WITH_IMM",
					     what, wc.opcode, wc.wc_flags);
				if (ntohl(wc.imm_data) != imm_of('W', peer_side, i))
					FAIL("%s: immediate 0x%08x, expected 0x%08x", what, ntohl(wc.imm_data), imm_of('W', peer_side, i));
				if (wc.byte_len != size)
					FAIL("%s: byte_len %u, expected %zu", what, wc.byte_len, size);
				size_t d = first_diff(wregion, i, peer_side, 'W', size);
				if (d != size)
					FAIL("%s: written data differs at byte %zu (0x%02x)", what, d, wregion[d]);
				/* 2: the SEND_WITH_IMM */
				snprintf(what, sizeof what, "SEND_WITH_IMM of iteration %d", i);
				poll_one(rcq, &wc, what);
				posted_recvs--;
				if (wc.opcode != IBV_WC_RECV || !(wc.wc_flags & IBV_WC_WITH_IMM))
					FAIL("%s: opcode %d flags 0x%x, expected IBV_WC_RECV with IBV_WC_WITH_IMM",
					     what, wc.opcode, wc.wc_flags);
				if (ntohl(wc.imm_data) != imm_of('S', peer_side, i))
					FAIL("%s: immediate 0x%08x, expected 0x%08x", what, ntohl(wc.imm_data), imm_of('S', peer_side, i));
				if (wc.byte_len != size)
					FAIL("%s: byte_len %u, expected %zu", what, wc.byte_len, size);
				d = first_diff(rbuf, i, peer_side, 'S', size);
				if (d != size)
					FAIL("%s: received data differs at byte %zu (0x%02x)", what, d, rbuf[d]);
				checks += 2;
				while (posted_recvs < RX_DEPTH) {
					if (ibv_post_recv(qp, &rwr, &bad_r))
						FAIL("ibv_post_recv failed");
					posted_recvs++;
				}
			}
		}
	}
	double secs = now() - t0;
	/* Every send completion was polled above; now both sides are done: leave together. */
	xfer(fd, &sync, 1, 1);
	xfer(fd, &sync, 1, 0);
	close(fd);
	printf("%s: %lu WRITE_WITH_IMM + SEND_WITH_IMM messages checked (data, immediate, byte_len), %d each way\n",
	       prog, checks, iters);
	printf("%zu bytes in %.2f seconds = %.2f Mbit/sec\n", 4 * size * (size_t)iters, secs,
	       4.0 * size * iters * 8 / secs / 1e6);
	printf("%d iters in %.2f seconds = %.2f usec/iter\n", iters, secs, secs * 1e6 / iters);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
