/*
 * netif.h: the network interface that holds one of this machine's
 * addresses.  rover-run names the interface of --local-addr to its workers
 * (GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, unless set), so their
 * collectives use the address the other nodes reach, not the one the host
 * name resolves to (a loopback address on many machines: Debian's
 * 127.0.1.1 line in /etc/hosts).
 */
#ifndef AGENT_NETIF_H
#define AGENT_NETIF_H

#include <stddef.h>

/* The name of the interface holding addr (a numeric IPv4 or IPv6 address,
 * or a name resolved to one) into name (size bytes).  0, -ENOENT when no
 * interface of this machine holds it (or addr does not resolve), -ENOSPC
 * when the name does not fit, or another -errno. */
int netif_of_addr(const char *addr, char *name, size_t size);

#endif
