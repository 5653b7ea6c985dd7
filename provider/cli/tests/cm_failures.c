/* RDMA CM failure paths through the drop-in librdmacm.so.1 (issue 19), each answered as kernel
 * rdma_cm answers it: an event or an errno, never a hang. Compiled and run by
 * provider/cli/tests/cm_failures.rs through `roce run`, one role per process:
 *
 *   server IP PORT DISC     accept one RC connection; DISC (server|client) names the side that
 *   client IP PORT DISC     disconnects with work posted (disconnect_with_work_posted below)
 *   listeners IP PORT       two listeners on one port: rdma_bind_addr's EADDRINUSE/EADDRNOTAVAIL
 *   bind IP PORT            bind one id to IP:PORT, another to 0.0.0.0:PORT; print both errnos
 *                           (another process on the same shared device may hold the port)
 *   hang-server IP PORT     listen; at the CONNECT_REQUEST print REQUEST and wait to be killed
 *   hang-client IP PORT     connect; once the REQ is out print REQ_SENT and wait to be killed
 *   wait-client IP PORT     connect and report the event that ends the attempt
 *   late-server IP PORT     listen; at the CONNECT_REQUEST print REQUEST, read a line from
 *                           stdin (the test kills the client first), accept, report the event
 *   hold-server IP PORT     accept one RC connection, print ESTABLISHED and wait to be killed
 *
 * Prints "CHECK <name> ok|FAIL ...", "EVENT <name> status <n> after_ms <n>" lines and, at the
 * end, "DONE failures <n>"; exits 0 iff no check failed. Every wait is bounded (WAIT_MS). */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include "verbs_setup.h"

#define WAIT_MS 60000
#define NRECV 4


static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static struct sockaddr_in addr_of(const char *ip, int port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", ip);
		exit(2);
	}
	return a;
}

/* The next event within WAIT_MS (NULL after printing why), its type/status kept in *ev_type
 * and *status; acknowledged by the caller. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	if (poll(&p, 1, WAIT_MS) != 1) {
		printf("no event within %d ms\n", WAIT_MS);
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		perror("rdma_get_cm_event");
		return NULL;
	}
	return ev;
}

/* Waits for `want`; anything else is a failed check named `what`. */
static struct rdma_cm_id *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
                                 const char *what)
{
	struct rdma_cm_event *ev = next_event(ch);
	struct rdma_cm_id *id;
	if (!ev) {
		CHECK(what, 0, "no %s", rdma_event_str(want));
		return NULL;
	}
	id = ev->id;
	CHECK(what, ev->event == want && ev->status == 0, "%s status %d, wanted %s",
	      rdma_event_str(ev->event), ev->status, rdma_event_str(want));
	int ok = ev->event == want;
	rdma_ack_cm_event(ev);
	return ok ? id : NULL;
}

/* Reports the next event (the one that ends a connection attempt) with the time it took. */
static void report_end(struct rdma_event_channel *ch, long t0)
{
	struct rdma_cm_event *ev = next_event(ch);
	if (!ev) {
		CHECK("attempt_ends", 0, "nothing ended the attempt");
		return;
	}
	printf("EVENT %s status %d after_ms %ld\n", rdma_event_str(ev->event), ev->status,
	       now_ms() - t0);
	CHECK("attempt_ends_with_an_error_event",
	      ev->event == RDMA_CM_EVENT_UNREACHABLE || ev->event == RDMA_CM_EVENT_REJECTED ||
	          ev->event == RDMA_CM_EVENT_CONNECT_ERROR,
	      "%s", rdma_event_str(ev->event));
	rdma_ack_cm_event(ev);
}

struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[4096];
};

static int make_qp(struct conn *c)
{
	struct ibv_qp_init_attr a;
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = c->pd ? ibv_create_cq(c->id->verbs, 64, NULL, NULL, 0) : NULL;
	c->mr = c->cq ? ibv_reg_mr(c->pd, c->buf, sizeof c->buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!c->mr)
		return -1;
	memset(&a, 0, sizeof a);
	a.send_cq = c->cq;
	a.recv_cq = c->cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return rdma_create_qp(c->id, c->pd, &a);
}

/* rnr_retry 7: a SEND to a peer without receives is retried for ever (it cannot complete). */
static struct rdma_conn_param params(void)
{
	struct rdma_conn_param p;
	memset(&p, 0, sizeof p);
	p.responder_resources = 1;
	p.initiator_depth = 1;
	p.retry_count = 7;
	p.rnr_retry_count = 7;
	return p;
}

static int post_recv(struct conn *c, uint64_t wr_id)
{
	struct ibv_sge s = {.addr = (uintptr_t)c->buf + 64 * (wr_id & 31), .length = 64, .lkey = c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1}, *bad;
	return ibv_post_recv(c->id->qp, &wr, &bad);
}

static int post_send(struct conn *c, uint64_t wr_id)
{
	struct ibv_sge s = {.addr = (uintptr_t)c->buf + 2048, .length = 16, .lkey = c->mr->lkey};
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	return ibv_post_send(c->id->qp, &wr, &bad);
}

/* Collects `n` completions (2 s at most); each must be WR_FLUSH_ERR with a wr_id from `ids`. */
static void expect_flushed(struct conn *c, const uint64_t *ids, int n, const char *what)
{
	int got = 0, bad = 0;
	long t0 = now_ms();
	uint64_t seen[16] = {0};
	while (got < n && now_ms() - t0 < 2000) {
		struct ibv_wc wc;
		int k = ibv_poll_cq(c->cq, 1, &wc);
		if (k <= 0)
			continue;
		if (wc.status != IBV_WC_WR_FLUSH_ERR) {
			printf("  wr_id %llu status %s\n", (unsigned long long)wc.wr_id,
			       ibv_wc_status_str(wc.status));
			bad++;
		}
		if (got < 16)
			seen[got] = wc.wr_id;
		got++;
	}
	int all = 1;
	for (int i = 0; i < n; i++) {
		int found = 0;
		for (int j = 0; j < got && j < 16; j++)
			found |= seen[j] == ids[i];
		all &= found;
	}
	CHECK(what, got == n && !bad && all, "%d of %d completions, %d not WR_FLUSH_ERR", got, n, bad);
}

static int cq_empty(struct conn *c)
{
	struct ibv_wc wc;
	return ibv_poll_cq(c->cq, 1, &wc) == 0;
}

/* The side that disconnects: NRECV receives and one SEND the peer cannot take (it has no
 * receive; RNR retried for ever) are posted; rdma_disconnect moves the QP to ERR (librdmacm's
 * ucma_shutdown) and all of them complete with WR_FLUSH_ERR, as do a receive and a send posted
 * afterwards; the peer's DREP ends in DISCONNECTED. */
static void disconnect_with_work_posted(struct rdma_event_channel *ch, struct conn *c)
{
	uint64_t ids[NRECV + 1];
	int r = 0;
	for (int i = 0; i < NRECV; i++) {
		ids[i] = 100 + i;
		r |= post_recv(c, ids[i]);
	}
	ids[NRECV] = 200;
	r |= post_send(c, 200);
	CHECK("work_posted", r == 0, "post failed");
	usleep(100000); /* not needed for the checks: lets the peer RNR-NAK the SEND first */
	CHECK("nothing_completed_before_disconnect", cq_empty(c), "a completion before disconnect");
	CHECK("rdma_disconnect", rdma_disconnect(c->id) == 0, "errno %d", errno);
	expect_flushed(c, ids, NRECV + 1, "posted_receives_and_stuck_send_flushed");
	uint64_t late[2] = {300, 301};
	r = post_recv(c, 300) | post_send(c, 301);
	CHECK("post_after_disconnect_accepted", r == 0, "post failed");
	expect_flushed(c, late, 2, "work_posted_after_disconnect_flushed");
	expect(ch, RDMA_CM_EVENT_DISCONNECTED, "disconnected_after_drep");
}

/* The peer: DISCONNECTED (status 0) arrives; it posts two receives, then calls rdma_disconnect
 * (which answers the DREQ) and they flush; nothing of the other side's SEND arrived. */
static void disconnected_by_peer(struct rdma_event_channel *ch, struct conn *c)
{
	expect(ch, RDMA_CM_EVENT_DISCONNECTED, "peer_gets_disconnected");
	CHECK("no_completion_before", cq_empty(c), "a completion arrived");
	uint64_t ids[2] = {400, 401};
	int r = post_recv(c, 400) | post_recv(c, 401);
	CHECK("receives_posted_after_disconnected", r == 0, "post failed");
	CHECK("rdma_disconnect_answers", rdma_disconnect(c->id) == 0, "errno %d", errno);
	expect_flushed(c, ids, 2, "peer_receives_flushed");
}

static void teardown(struct conn *c)
{
	rdma_destroy_qp(c->id);
	ibv_dereg_mr(c->mr);
	ibv_destroy_cq(c->cq);
	ibv_dealloc_pd(c->pd);
}

static struct rdma_cm_id *listen_on(struct rdma_event_channel *ch, const char *ip, int port)
{
	struct rdma_cm_id *l;
	struct sockaddr_in a = addr_of(ip, port);
	if (rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) || rdma_bind_addr(l, (struct sockaddr *)&a) ||
	    rdma_listen(l, 4)) {
		perror("listen");
		exit(2);
	}
	printf("LISTENING\n");
	fflush(stdout);
	return l;
}

/* Connects `c->id` (on channel ch) to ip:port with a QP; returns once the REQ is out. */
static int start_connect(struct rdma_event_channel *ch, struct conn *c, const char *ip, int port)
{
	struct sockaddr_in a = addr_of(ip, port);
	struct rdma_conn_param p = params();
	if (rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&a, 2000) ||
	    !expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, "addr_resolved") ||
	    rdma_resolve_route(c->id, 2000) ||
	    !expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "route_resolved") || make_qp(c) ||
	    rdma_connect(c->id, &p)) {
		perror("connect");
		return -1;
	}
	return 0;
}

static int serve(const char *ip, int port, int self_disconnects)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l = listen_on(ch, ip, port);
	static struct conn c;
	struct rdma_conn_param p = params();
	c.id = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, "connect_request");
	if (!c.id || make_qp(&c) || rdma_accept(c.id, &p))
		return done() | 1;
	if (!expect(ch, RDMA_CM_EVENT_ESTABLISHED, "established"))
		return done() | 1;
	if (self_disconnects)
		disconnect_with_work_posted(ch, &c);
	else
		disconnected_by_peer(ch, &c);
	teardown(&c);
	rdma_destroy_id(c.id);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return done();
}

static int connect_to(const char *ip, int port, int self_disconnects)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	static struct conn c;
	if (start_connect(ch, &c, ip, port) ||
	    !expect(ch, RDMA_CM_EVENT_ESTABLISHED, "established"))
		return done() | 1;
	if (self_disconnects)
		disconnect_with_work_posted(ch, &c);
	else
		disconnected_by_peer(ch, &c);
	teardown(&c);
	rdma_destroy_id(c.id);
	rdma_destroy_event_channel(ch);
	return done();
}

static int bind_errno(struct rdma_cm_id *id, const char *ip, int port)
{
	struct sockaddr_in a = addr_of(ip, port);
	return rdma_bind_addr(id, (struct sockaddr *)&a) ? errno : 0;
}

/* Kernel cma.c: rdma_bind_addr → cma_get_port → cma_check_port (no REUSEADDR): the same
 * address and port → EADDRINUSE; a wildcard on either side → EADDRNOTAVAIL; the failed id
 * stays unbound (IDLE) and can bind elsewhere; a destroyed listener frees its port. The
 * failure comes at bind, not at listen. */
static int listeners(const char *ip, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b, *w, *x, *y;
	int e;
	rdma_create_id(ch, &a, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &b, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &w, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &x, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &y, NULL, RDMA_PS_TCP);
	CHECK("first_bind", bind_errno(a, ip, port) == 0, "errno %d", errno);
	CHECK("first_listen", rdma_listen(a, 4) == 0, "errno %d", errno);
	e = bind_errno(b, ip, port);
	CHECK("second_bind_same_address_eaddrinuse", e == EADDRINUSE, "errno %d (%s)", e, strerror(e));
	e = bind_errno(w, "0.0.0.0", port);
	CHECK("wildcard_bind_beside_a_listener_eaddrnotavail", e == EADDRNOTAVAIL, "errno %d (%s)", e,
	      strerror(e));
	e = bind_errno(b, ip, port + 1);
	CHECK("failed_id_binds_elsewhere", e == 0, "errno %d (%s)", e, strerror(e));
	CHECK("and_listens", rdma_listen(b, 4) == 0, "errno %d", errno);
	e = bind_errno(w, "0.0.0.0", port + 2);
	CHECK("wildcard_listener", e == 0 && rdma_listen(w, 4) == 0, "errno %d", e);
	e = bind_errno(x, ip, port + 2);
	CHECK("specific_bind_beside_a_wildcard_eaddrnotavail", e == EADDRNOTAVAIL, "errno %d (%s)", e,
	      strerror(e));
	CHECK("other_port_space_shares_the_port", rdma_destroy_id(y) == 0 &&
	      rdma_create_id(ch, &y, NULL, RDMA_PS_UDP) == 0 && bind_errno(y, ip, port) == 0,
	      "errno %d", errno);
	rdma_destroy_id(a);
	e = bind_errno(x, ip, port);
	CHECK("port_free_after_destroy", e == 0 && rdma_listen(x, 4) == 0, "errno %d (%s)", e,
	      strerror(e));
	rdma_destroy_id(b);
	rdma_destroy_id(w);
	rdma_destroy_id(x);
	rdma_destroy_id(y);
	rdma_destroy_event_channel(ch);
	return done();
}

static int bind_both(const char *ip, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *w;
	rdma_create_id(ch, &a, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &w, NULL, RDMA_PS_TCP);
	int ea = bind_errno(a, ip, port);
	int ew = bind_errno(w, "0.0.0.0", port);
	printf("BIND addr %d any %d\n", ea, ew);
	rdma_destroy_id(a);
	rdma_destroy_id(w);
	rdma_destroy_event_channel(ch);
	return done();
}

/* Says which state the program reached, then waits to be killed. */
static int hang_in(const char *state)
{
	printf("%s\n", state);
	fflush(stdout);
	for (;;)
		pause();
}

static int hang_server(const char *ip, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	listen_on(ch, ip, port);
	if (!expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, "connect_request"))
		return done() | 1;
	return hang_in("REQUEST");
}

static int hang_client(const char *ip, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	static struct conn c;
	if (start_connect(ch, &c, ip, port))
		return done() | 1;
	return hang_in("REQ_SENT");
}

static int hold_server(const char *ip, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	static struct conn c;
	struct rdma_conn_param p = params();
	listen_on(ch, ip, port);
	c.id = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, "connect_request");
	if (!c.id || make_qp(&c) || rdma_accept(c.id, &p) ||
	    !expect(ch, RDMA_CM_EVENT_ESTABLISHED, "established"))
		return done() | 1;
	return hang_in("ESTABLISHED");
}

static int wait_client(const char *ip, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	static struct conn c;
	if (start_connect(ch, &c, ip, port))
		return done() | 1;
	printf("REQ_SENT\n");
	fflush(stdout);
	report_end(ch, now_ms());
	return done();
}

static int late_server(const char *ip, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	static struct conn c;
	char line[64];
	struct rdma_conn_param p = params();
	listen_on(ch, ip, port);
	c.id = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, "connect_request");
	if (!c.id)
		return done() | 1;
	printf("REQUEST\n");
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return done() | 1;
	CHECK("accept", make_qp(&c) == 0 && rdma_accept(c.id, &p) == 0, "errno %d", errno);
	report_end(ch, now_ms());
	return done();
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s ROLE IP PORT [server|client]\n", argv[0]);
		return 2;
	}
	const char *role = argv[1], *ip = argv[2];
	int port = atoi(argv[3]);
	int server_disc = argc > 4 && !strcmp(argv[4], "server");
	if (!strcmp(role, "server"))
		return serve(ip, port, server_disc);
	if (!strcmp(role, "client"))
		return connect_to(ip, port, !server_disc);
	if (!strcmp(role, "listeners"))
		return listeners(ip, port);
	if (!strcmp(role, "bind"))
		return bind_both(ip, port);
	if (!strcmp(role, "hang-server"))
		return hang_server(ip, port);
	if (!strcmp(role, "hang-client"))
		return hang_client(ip, port);
	if (!strcmp(role, "wait-client"))
		return wait_client(ip, port);
	if (!strcmp(role, "late-server"))
		return late_server(ip, port);
	if (!strcmp(role, "hold-server"))
		return hold_server(ip, port);
	fprintf(stderr, "unknown role %s\n", role);
	return 2;
}
