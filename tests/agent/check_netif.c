/*
 * check_netif.c: the interface of --local-addr (netif.h) and what the
 * workers are told of it (worker_env: GLOO_SOCKET_IFNAME and
 * NCCL_SOCKET_IFNAME, each unless already set).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"
#include "netif.h"
#include "testutil.h"
#include "worker.h"

START_TEST(test_loopback_is_lo)
{
	char name[64];
	ck_assert_int_eq(netif_of_addr("127.0.0.1", name, sizeof(name)), 0);
	ck_assert_str_eq(name, "lo");
	ck_assert_int_eq(netif_of_addr("localhost", name, sizeof(name)), 0);
	ck_assert_str_eq(name, "lo");
}
END_TEST

START_TEST(test_address_not_held)
{
	char name[64] = "unchanged";
	/* TEST-NET-1: documentation only, held by no interface here */
	ck_assert_int_eq(netif_of_addr("192.0.2.55", name, sizeof(name)), -ENOENT);
	ck_assert_int_eq(netif_of_addr("", name, sizeof(name)), -ENOENT);
	ck_assert_int_eq(netif_of_addr("127.0.0.1", name, 2), -ENOSPC);
}
END_TEST

/* The value of key in env (NULL-terminated "K=V"), or NULL. */
static const char *env_get(const char *const *env, const char *key)
{
	size_t k = strlen(key);
	for (; *env; env++)
		if (!strncmp(*env, key, k) && (*env)[k] == '=')
			return *env + k + 1;
	return NULL;
}

static int env_of(const char *ifname, const char **env, char *store, size_t size)
{
	static struct flags f;
	struct worker_group g = { .flags = &f, .local_world_size = 1, .world_size = 2,
				  .group_world_size = 2, .master_addr = "10.0.0.1",
				  .run_id = "j", .rover_master = "10.0.0.1:7070",
				  .node_name = "n", .sock_ifname = ifname };
	return worker_env(&g, 0, env, 64, store, size);
}

START_TEST(test_workers_told_the_interface)
{
	const char *env[64];
	char store[4096];
	unsetenv("GLOO_SOCKET_IFNAME");
	unsetenv("NCCL_SOCKET_IFNAME");
	ck_assert_int_gt(env_of("eth1", env, store, sizeof(store)), 0);
	ck_assert_str_eq(env_get(env, "GLOO_SOCKET_IFNAME"), "eth1");
	ck_assert_str_eq(env_get(env, "NCCL_SOCKET_IFNAME"), "eth1");
	/* no --local-addr: gloo's own choice, nothing set */
	ck_assert_int_gt(env_of("", env, store, sizeof(store)), 0);
	ck_assert_ptr_null(env_get(env, "GLOO_SOCKET_IFNAME"));
	ck_assert_ptr_null(env_get(env, "NCCL_SOCKET_IFNAME"));
	/* the user's own setting wins: the worker inherits it untouched */
	setenv("GLOO_SOCKET_IFNAME", "ib0", 1);
	ck_assert_int_gt(env_of("eth1", env, store, sizeof(store)), 0);
	ck_assert_ptr_null(env_get(env, "GLOO_SOCKET_IFNAME"));
	ck_assert_str_eq(env_get(env, "NCCL_SOCKET_IFNAME"), "eth1");
	unsetenv("GLOO_SOCKET_IFNAME");
}
END_TEST

static Suite *netif_suite(void)
{
	Suite *s = suite_create("netif");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_loopback_is_lo);
	tcase_add_test(tc, test_address_not_held);
	tcase_add_test(tc, test_workers_told_the_interface);
	suite_add_tcase(s, tc);
	return s;
}

RV_TEST_MAIN(netif_suite)
