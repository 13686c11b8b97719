/* traffic.h: shared declarations of sprx-traffic (the experiments' traffic tool). */
#ifndef SPRX_TRAFFIC_H
#define SPRX_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>

#define MAX_FLOWS 1024       /* flows per run (receiver) */
#define MAX_PROC_FLOWS 256   /* flows per sender process */
#define MAX_CTRL 128         /* sender processes per run */
#define WARM_BIT (1ULL << 40) /* tag bit of the warm-up message each flow sends before GO */

enum mode { MODE_BURST, MODE_SUSTAINED };

/* Everything the command line sets; the receiver's values of mode..window reach the senders in GO. */
struct opts {
	int is_recv;
	const char *bind_ip;   /* local address (both roles) */
	const char *server_ip; /* sender: receiver address */
	int ctrl_port;         /* receiver's control port; kernel TCP data uses ctrl_port + 1 */
	const char *prov;      /* libfabric provider, NULL with kernel_tcp */
	int kernel_tcp;
	int flows;             /* receiver: total flows; sender: flows in this process */
	int flow_base;         /* sender: id of its first flow */
	enum mode mode;
	uint64_t bytes;        /* burst: bytes per flow */
	uint64_t msg;          /* message (write) size, bytes */
	int duration_ms;       /* sustained: sending time */
	int window;            /* messages outstanding per flow */
	int timeout_s;         /* hard bound on the whole run */
	int idle_us;           /* sleep when a loop pass did nothing (0 = yield) */
	int sample_ms;         /* sustained: sampling period */
	int start_delay_ms;    /* receiver: GO start time = now + this */
	int sport;             /* sender, kernel TCP: flow f binds source port sport + f (0 = any) */
};

/* time.c-like helpers (util.c) */
uint64_t now_ns(void);
void idle(int idle_us);
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Control connection: newline-terminated text lines over TCP (util.c). */
struct line_conn {
	int fd;
	char buf[65536];
	size_t len;
	int closed;
};
int ctrl_listen(const char *ip, int port);
int ctrl_connect(const char *ip, int port, int timeout_ms);
/* As ctrl_connect, from source port sport (0 = ephemeral). */
int ctrl_connect_from(const char *ip, int port, int sport, int timeout_ms);
int ctrl_accept(int lfd); /* -1 when none pending */
void line_init(struct line_conn *c, int fd);
/* Next complete line (NUL-terminated, without '\n') or NULL; never blocks. */
char *line_next(struct line_conn *c);
void send_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hex_encode(const void *p, size_t n, char *out);
size_t hex_decode(const char *s, void *out, size_t cap);

/* A transport: libfabric (fab.c) or kernel TCP (ktcp.c). Receiver and sender sides. */
struct rx_stats {
	uint64_t bytes[MAX_FLOWS];   /* received so far per flow */
	uint64_t done_ns[MAX_FLOWS]; /* burst: when bytes reached the target (0 = not yet) */
	uint64_t first_ns[MAX_FLOWS];
	uint64_t errors;
};

struct transport {
	/* receiver */
	int (*rx_open)(const struct opts *o, char *name_hex, size_t cap);
	int (*rx_add_peer)(const char *name_hex);       /* insert a sender's address */
	int (*rx_ready_flows)(void);                    /* flows whose warm-up arrived */
	void (*rx_start)(const struct opts *o);        /* post data receives */
	int (*rx_progress)(const struct opts *o, struct rx_stats *st); /* >0 if work done */
	/* sender */
	int (*tx_open)(const struct opts *o, char names_hex[][160]);
	int (*tx_connect)(const char *server_hex);     /* AV insert / connect + warm-up */
	int (*tx_warm_done)(void);
	int (*tx_progress)(int sending, uint64_t deadline_ns); /* >0 if work done */
	int (*tx_all_sent)(void);
	void (*close)(void);
};

extern struct transport fab_transport;
extern struct transport ktcp_transport;
extern const struct opts *g_opts;

#endif
