/* main.c: sprx-traffic, burst / sustained flows over libfabric (RDM, tagged) or kernel TCP.
 *
 * One receiver process (role recv) and any number of sender processes (role send), each with
 * several flows. Control: senders connect to the receiver's TCP control port, send
 * "HELLO base n addr..." (their fabric addresses, hex), get "ADDR hex" back, warm every flow up
 * (one small message, so connection set-up is not timed), send "READY"; when all flows are
 * ready the receiver sends "GO start_ns mode bytes msg duration_ms window" with a start time a
 * little ahead, everyone starts at that instant, and "DONE" ends the run. The receiver prints one
 * JSON line per flow (burst) or per flow and sample period (sustained), then a summary line.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "traffic.h"

const struct opts *g_opts;
static struct opts opt = {
	.ctrl_port = 19000,
	.prov = "tcp",
	.flows = 1,
	.mode = MODE_BURST,
	.bytes = 1 << 20,
	.msg = 65536,
	.duration_ms = 2000,
	.window = 4,
	.timeout_s = 60,
	.idle_us = 20,
	.sample_ms = 100,
	.start_delay_ms = 200,
};

static void usage(void)
{
	fprintf(stderr,
		"usage: sprx-traffic recv|send [options]\n"
		"  --bind IP            local address (required)\n"
		"  --server IP          (send) receiver address\n"
		"  --port N             receiver control port (default 19000; kernel TCP data on N+1)\n"
		"  --prov NAME          libfabric provider (default tcp) | --kernel-tcp\n"
		"  --flows N            (recv) total flows; (send) flows in this process\n"
		"  --flow-base N        (send) id of this process's first flow\n"
		"  --mode burst|sustained  (recv) \n"
		"  --bytes N            (recv) burst bytes per flow (suffix k/m/g = KiB/MiB/GiB)\n"
		"  --msg N              message size, bytes (recv decides; senders learn it in GO)\n"
		"  --duration-ms N      (recv) sustained sending time\n"
		"  --window N           (recv) messages outstanding per flow (<= 64)\n"
		"  --sample-ms N        (recv) sustained sample period (default 100)\n"
		"  --timeout-s N        bound on the whole run (default 60)\n"
		"  --idle-us N          sleep when idle, us (0 = yield; default 20)\n"
		"  --sport N            (send, kernel TCP) flow f binds source port N + f\n");
	exit(2);
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	case 0: break;
	default: die("bad size %s", s);
	}
	return v;
}

static void parse(int argc, char **argv)
{
	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "recv"))
		opt.is_recv = 1;
	else if (strcmp(argv[1], "send"))
		usage();
	static struct option lo[] = {
		{"bind", 1, 0, 'b'},      {"server", 1, 0, 's'},    {"port", 1, 0, 'p'},
		{"prov", 1, 0, 'P'},      {"kernel-tcp", 0, 0, 'K'}, {"flows", 1, 0, 'f'},
		{"flow-base", 1, 0, 'B'}, {"mode", 1, 0, 'm'},      {"bytes", 1, 0, 'n'},
		{"msg", 1, 0, 'M'},       {"duration-ms", 1, 0, 'd'}, {"window", 1, 0, 'w'},
		{"timeout-s", 1, 0, 't'}, {"idle-us", 1, 0, 'i'},   {"sample-ms", 1, 0, 'S'}, {"sport", 1, 0, 'o'},
		{0, 0, 0, 0}};
	int c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'b': opt.bind_ip = optarg; break;
		case 's': opt.server_ip = optarg; break;
		case 'p': opt.ctrl_port = atoi(optarg); break;
		case 'P': opt.prov = optarg; break;
		case 'K': opt.kernel_tcp = 1; break;
		case 'f': opt.flows = atoi(optarg); break;
		case 'B': opt.flow_base = atoi(optarg); break;
		case 'm':
			if (!strcmp(optarg, "burst")) opt.mode = MODE_BURST;
			else if (!strcmp(optarg, "sustained")) opt.mode = MODE_SUSTAINED;
			else usage();
			break;
		case 'n': opt.bytes = parse_size(optarg); break;
		case 'M': opt.msg = parse_size(optarg); break;
		case 'd': opt.duration_ms = atoi(optarg); break;
		case 'w': opt.window = atoi(optarg); break;
		case 't': opt.timeout_s = atoi(optarg); break;
		case 'i': opt.idle_us = atoi(optarg); break;
		case 'S': opt.sample_ms = atoi(optarg); break;
		case 'o': opt.sport = atoi(optarg); break;
		default: usage();
		}
	}
	if (!opt.bind_ip || (!opt.is_recv && !opt.server_ip))
		usage();
	int cap = opt.is_recv ? MAX_FLOWS : MAX_PROC_FLOWS;
	if (opt.flows < 1 || opt.flows > cap || opt.window < 1 || opt.window > 64 || opt.msg < 1 ||
	    opt.msg > (64u << 20) || opt.timeout_s < 1 || opt.sample_ms < 1)
		die("option out of range (flows 1..%d, window 1..64, msg 1..64 MiB)", cap);
	if (opt.kernel_tcp)
		opt.prov = NULL;
	g_opts = &opt;
}

static const char *transport_name(void) { return opt.kernel_tcp ? "kernel-tcp" : opt.prov; }

static double cpu_s(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + (double)r.ru_stime.tv_sec +
	       r.ru_stime.tv_usec / 1e6;
}

/* ---------------- receiver ---------------- */

static struct rx_stats st;

static int run_recv(struct transport *t)
{
	static char name[600];
	t->rx_open(&opt, name, sizeof name);
	int lfd = ctrl_listen(opt.bind_ip, opt.ctrl_port);
	static struct line_conn cc[MAX_CTRL];
	int ncc = 0, hello_flows = 0, ready_flows = 0, go = 0;
	uint64_t start = 0, t0 = now_ns(), hard_end = t0 + (uint64_t)opt.timeout_s * 1000000000ULL;
	uint64_t next_sample = 0, last_bytes[MAX_FLOWS] = {0};
	int sample_no = 0, finished = 0;
	fprintf(stderr, "sprx-traffic recv: %s at %s, %d flows, waiting for senders\n", transport_name(),
		opt.bind_ip, opt.flows);
	while (!finished) {
		int work = 0;
		int fd;
		while ((fd = ctrl_accept(lfd)) >= 0) {
			if (ncc == MAX_CTRL)
				die("too many sender processes");
			line_init(&cc[ncc++], fd);
		}
		for (int i = 0; i < ncc; i++) {
			char *l;
			while ((l = line_next(&cc[i]))) {
				work++;
				if (!strncmp(l, "HELLO ", 6)) {
					int base, n, off;
					if (sscanf(l + 6, "%d %d %n", &base, &n, &off) != 2 || base < 0 || n < 1 ||
					    base + n > opt.flows)
						die("bad HELLO: %s", l);
					char *p = l + 6 + off, *tok, *save;
					for (tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
						if (strcmp(tok, "-") && t->rx_add_peer(tok))
							die("cannot insert a sender address");
					hello_flows += n;
					send_line(cc[i].fd, "ADDR %s", name);
				} else if (!strncmp(l, "READY ", 6)) {
					ready_flows += atoi(l + 6);
				}
			}
		}
		work += t->rx_progress(&opt, &st);
		uint64_t now = now_ns();
		if (!go && ready_flows == opt.flows && hello_flows == opt.flows &&
		    t->rx_ready_flows() >= opt.flows) {
			t->rx_start(&opt);
			start = now + (uint64_t)opt.start_delay_ms * 1000000ULL;
			for (int i = 0; i < ncc; i++)
				send_line(cc[i].fd, "GO %" PRIu64 " %d %" PRIu64 " %" PRIu64 " %d %d", start,
					  (int)opt.mode, opt.bytes, opt.msg, opt.duration_ms, opt.window);
			go = 1;
			next_sample = start + (uint64_t)opt.sample_ms * 1000000ULL;
			fprintf(stderr, "sprx-traffic recv: all %d flows ready after %.2f s; GO\n", opt.flows,
				(now - t0) / 1e9);
		}
		if (go && opt.mode == MODE_SUSTAINED && now >= next_sample) {
			sample_no++;
			double t_s = sample_no * opt.sample_ms / 1000.0;
			for (int f = 0; f < opt.flows; f++) {
				uint64_t d = st.bytes[f] - last_bytes[f];
				last_bytes[f] = st.bytes[f];
				printf("{\"kind\":\"sample\",\"transport\":\"%s\",\"t_s\":%.3f,\"flow\":%d,"
				       "\"bytes\":%" PRIu64 ",\"mbps\":%.3f}\n",
				       transport_name(), t_s, f, d, d * 8.0 / (opt.sample_ms * 1000.0));
			}
			next_sample += (uint64_t)opt.sample_ms * 1000000ULL;
			if (next_sample > start + (uint64_t)opt.duration_ms * 1000000ULL + 1000)
				finished = 1;
		}
		if (go && opt.mode == MODE_BURST) {
			int done = 0;
			for (int f = 0; f < opt.flows; f++)
				done += st.done_ns[f] != 0;
			if (done == opt.flows)
				finished = 1;
		}
		if (now > hard_end) {
			warnx_("recv: timeout after %d s (go=%d, ready %d/%d)", opt.timeout_s, go, ready_flows,
			       opt.flows);
			finished = 2;
		}
		if (!work && !finished)
			idle(opt.idle_us);
	}
	for (int i = 0; i < ncc; i++)
		send_line(cc[i].fd, "DONE");
	uint64_t total = 0, max_fct = 0;
	int completed = 0;
	for (int f = 0; f < opt.flows; f++) {
		total += st.bytes[f];
		if (opt.mode == MODE_BURST) {
			if (st.done_ns[f]) {
				completed++;
				uint64_t fct = st.done_ns[f] - start;
				if (fct > max_fct)
					max_fct = fct;
				printf("{\"kind\":\"flow\",\"transport\":\"%s\",\"flow\":%d,\"bytes\":%" PRIu64
				       ",\"fct_s\":%.6f,\"first_s\":%.6f}\n",
				       transport_name(), f, st.bytes[f], fct / 1e9,
				       ((int64_t)(st.first_ns[f] - start)) / 1e9);
			} else {
				printf("{\"kind\":\"flow\",\"transport\":\"%s\",\"flow\":%d,\"bytes\":%" PRIu64
				       ",\"fct_s\":null}\n",
				       transport_name(), f, st.bytes[f]);
			}
		}
	}
	double span = opt.mode == MODE_BURST ? max_fct / 1e9 : opt.duration_ms / 1000.0;
	printf("{\"kind\":\"summary\",\"transport\":\"%s\",\"mode\":\"%s\",\"flows\":%d,\"completed\":%d,"
	       "\"bytes\":%" PRIu64 ",\"span_s\":%.6f,\"goodput_mbps\":%.3f,\"errors\":%" PRIu64
	       ",\"timeout\":%s,\"elapsed_s\":%.6f,\"rx_cpu_s\":%.3f}\n",
	       transport_name(), opt.mode == MODE_BURST ? "burst" : "sustained", opt.flows,
	       opt.mode == MODE_BURST ? completed : opt.flows, total, span,
	       span > 0 ? total * 8.0 / span / 1e6 : 0.0, st.errors, finished == 2 ? "true" : "false",
	       go ? ((int64_t)(now_ns() - start)) / 1e9 : 0.0, cpu_s());
	fflush(stdout);
	t->close();
	return finished == 2 ? 3 : 0;
}

/* ---------------- sender ---------------- */

static int run_send(struct transport *t)
{
	static char names[MAX_PROC_FLOWS][160];
	t->tx_open(&opt, names);
	int fd = ctrl_connect(opt.server_ip, opt.ctrl_port, 15000);
	struct line_conn c;
	line_init(&c, fd);
	static char hello[MAX_PROC_FLOWS * 162 + 64];
	int off = snprintf(hello, sizeof hello, "HELLO %d %d", opt.flow_base, opt.flows);
	for (int f = 0; f < opt.flows; f++)
		off += snprintf(hello + off, sizeof hello - (size_t)off, " %s", names[f]);
	send_line(fd, "%s", hello);
	uint64_t hard_end = now_ns() + (uint64_t)opt.timeout_s * 1000000000ULL;
	int connected = 0, ready = 0, go = 0, done = 0;
	uint64_t start = 0, deadline = 0;
	while (!done) {
		int work = 0;
		char *l;
		while ((l = line_next(&c))) {
			work++;
			if (!strncmp(l, "ADDR ", 5) && !connected) {
				if (t->tx_connect(l + 5))
					die("cannot reach the receiver");
				connected = 1;
			} else if (!strncmp(l, "GO ", 3)) {
				int mode;
				if (sscanf(l + 3, "%" SCNu64 " %d %" SCNu64 " %" SCNu64 " %d %d", &start, &mode,
					   &opt.bytes, &opt.msg, &opt.duration_ms, &opt.window) != 6)
					die("bad GO: %s", l);
				opt.mode = mode == MODE_SUSTAINED ? MODE_SUSTAINED : MODE_BURST;
				deadline = start + (uint64_t)opt.duration_ms * 1000000ULL;
				go = 1;
				/* Everyone starts at the same instant: spin the last stretch. */
				while (now_ns() < start) {
					t->tx_progress(0, 0);
					idle(opt.idle_us);
				}
			} else if (!strcmp(l, "DONE")) {
				done = 1;
			}
		}
		if (c.closed && !done) {
			warnx_("send: receiver closed the control connection");
			break;
		}
		if (connected && !ready && t->tx_warm_done()) {
			send_line(fd, "READY %d", opt.flows);
			ready = 1;
		}
		work += t->tx_progress(go, deadline);
		if (now_ns() > hard_end) {
			warnx_("send: timeout after %d s", opt.timeout_s);
			break;
		}
		if (!work)
			idle(opt.idle_us);
	}
	fprintf(stderr, "sprx-traffic send: flows %d..%d done=%d cpu %.2f s\n", opt.flow_base,
		opt.flow_base + opt.flows - 1, done, cpu_s());
	t->close();
	return done ? 0 : 3;
}

int main(int argc, char **argv)
{
	parse(argc, argv);
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	struct transport *t = opt.kernel_tcp ? &ktcp_transport : &fab_transport;
	return opt.is_recv ? run_recv(t) : run_send(t);
}
