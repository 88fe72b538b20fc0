/*
 * netif.c: the interface that holds an address (netif.h): the address's
 * resolutions against getifaddrs(3).
 */
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "netif.h"

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (!a || !b || a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
			      sizeof(struct in6_addr)) == 0;
	return false;
}

/* The first interface in ifs holding one of the addresses of ai, or NULL. */
static const char *holder(const struct ifaddrs *ifs, const struct addrinfo *ai)
{
	for (const struct addrinfo *a = ai; a; a = a->ai_next)
		for (const struct ifaddrs *i = ifs; i; i = i->ifa_next)
			if (same_addr(i->ifa_addr, a->ai_addr))
				return i->ifa_name;
	return NULL;
}

int netif_of_addr(const char *addr, char *name, size_t size)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	if (!addr || !*addr || getaddrinfo(addr, NULL, &hints, &ai) != 0)
		return -ENOENT;
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) < 0) {
		int e = -errno;
		freeaddrinfo(ai);
		return e;
	}
	const char *n = holder(ifs, ai);
	int rc = !n ? -ENOENT : (size_t)snprintf(name, size, "%s", n) >= size ? -ENOSPC : 0;
	freeifaddrs(ifs);
	freeaddrinfo(ai);
	return rc;
}
