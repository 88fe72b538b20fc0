/*
 * check_apply.c: rv_scaling_apply (scaling/scaling.c), the one function rover-master
 * and rover-sim apply a ScalePlan with: counts within the replica spec,
 * resources, a straggler in `remove` replaced, a hot PS in `migrate`
 * relaunched with its own resources (kept until its role's resources
 * change or its rank goes), and every part left undone named.
 */
#include <check.h>
#include <string.h>

#include "rover_scaling.h"
#include "testutil.h"

/* A PS job: workers 1..4 (2), PS 1..2 (2), 1 core and 1 GiB each. */
static void spec_init(struct rv_job_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->strategy = RV_STRATEGY_PS;
	for (int r = RV_ROLE_WORKER; r <= RV_ROLE_PS; r++) {
		struct rv_replica_spec *rs = &spec->replicas[r];
		rs->present = true;
		rs->replicas = 2;
		rs->min_replicas = 1;
		rs->max_replicas = r == RV_ROLE_PS ? 2 : 4;
		rs->has_resources = true;
		rs->resource = (struct rv_resource){ .cpu = 1, .memory_mb = 1024 };
	}
}

static void group(struct rv_scale_plan *p, enum rv_role r, int count, double cpu, int64_t mem)
{
	p->groups[r] = (struct rv_plan_group){ .present = true,
					       .count = count,
					       .resource = { .cpu = cpu, .memory_mb = mem } };
}

static void node(struct rv_plan_node *n, const char *name, enum rv_role r, double cpu)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->node, sizeof(n->node), "%s", name);
	n->role = r;
	n->resource.cpu = cpu;
}

/* What each test applies a plan to: the spec spec_init makes, its target,
 * the plan and its effect (static: a plan and an effect are large). */
static struct {
	struct rv_job_spec spec;
	struct rv_scaling_target t;
	struct rv_scale_plan p;
	struct rv_scaling_effect eff;
} fx;

/* fx anew, its PS with stateHandover when handover, its plan empty. */
static void fix_init(bool handover)
{
	memset(&fx, 0, sizeof(fx));
	spec_init(&fx.spec);
	fx.spec.replicas[RV_ROLE_PS].state_handover = handover;
	rv_scaling_target_init(&fx.t, &fx.spec);
}

static void fix_apply(void)
{
	rv_scaling_apply(&fx.p, &fx.spec, &fx.t, &fx.eff);
}

START_TEST(test_counts_clamped_and_named)
{
	fix_init(false);
	group(&fx.p, RV_ROLE_WORKER, 9, 2, 2048);
	fix_apply();
	ck_assert(fx.eff.changed);
	ck_assert_int_eq(fx.t.groups[RV_ROLE_WORKER].count, 4);
	ck_assert_int_eq(fx.eff.asked[RV_ROLE_WORKER], 9);
	ck_assert_int_eq(fx.eff.asked[RV_ROLE_PS], -1);
	ck_assert(fx.t.groups[RV_ROLE_WORKER].resource.cpu == 2);
	ck_assert_int_eq(fx.t.groups[RV_ROLE_PS].count, 2); /* not in the plan: kept */
	ck_assert_msg(strstr(fx.eff.not_applied, "worker count 9: clamped to 4"), "%s",
		      fx.eff.not_applied);
	ck_assert_int_eq(fx.eff.nact, 0);
}
END_TEST

START_TEST(test_remove_replaces_migrate_relaunches)
{
	fix_init(false);
	group(&fx.p, RV_ROLE_WORKER, 3, 1, 1024);
	group(&fx.p, RV_ROLE_PS, 2, 1, 1024);
	node(&fx.p.remove[fx.p.nremove++], "worker-2", RV_ROLE_WORKER, 0);
	node(&fx.p.remove[fx.p.nremove++], "worker-7", RV_ROLE_WORKER, 0);
	node(&fx.p.launch[fx.p.nlaunch++], "worker-2", RV_ROLE_WORKER, 1);
	node(&fx.p.migrate[fx.p.nmigrate++], "ps-1", RV_ROLE_PS, 3);
	fix_apply();
	ck_assert_int_eq(fx.eff.nact, 2);
	ck_assert_int_eq(fx.eff.act[0].kind, RV_SCALING_REPLACE);
	ck_assert_str_eq(fx.eff.act[0].node, "worker-2");
	ck_assert_int_eq(fx.eff.act[0].rank, 2);
	ck_assert(fx.eff.act[0].resource.cpu == 1);
	ck_assert_int_eq(fx.eff.act[1].kind, RV_SCALING_MIGRATE);
	ck_assert_str_eq(fx.eff.act[1].node, "ps-1");
	ck_assert_int_eq(fx.eff.act[1].rank, 1);
	ck_assert(fx.eff.act[1].resource.cpu == 3);
	ck_assert_int_eq(fx.eff.act[1].resource.memory_mb, 1024); /* the role's */
	ck_assert_msg(strstr(fx.eff.not_applied, "remove worker-7: the job runs no such node") &&
			      strstr(fx.eff.not_applied, "migrate ps-1: the PS data handover"),
		      "%s", fx.eff.not_applied);
	ck_assert(rv_scaling_node_resource(&fx.t, RV_ROLE_PS, "ps-1").cpu == 3);
	ck_assert(rv_scaling_node_resource(&fx.t, RV_ROLE_PS, "ps-0").cpu == 1);

	/* the same role resources again: ps-1 keeps its own, nothing relaunched */
	memset(&fx.p, 0, sizeof(fx.p));
	group(&fx.p, RV_ROLE_PS, 2, 1, 1024);
	fix_apply();
	ck_assert_int_eq(fx.eff.nact, 0);
	ck_assert_str_eq(fx.eff.not_applied, "");
	ck_assert(!fx.eff.changed);
	ck_assert(rv_scaling_node_resource(&fx.t, RV_ROLE_PS, "ps-1").cpu == 3);
	/* one PS fewer: ps-1 is gone, and its own resources with it */
	group(&fx.p, RV_ROLE_PS, 1, 1, 1024);
	fix_apply();
	ck_assert_int_eq(fx.t.nown, 0);
	/* new role resources drop what a node had of its own */
	node(&fx.p.migrate[fx.p.nmigrate++], "ps-0", RV_ROLE_PS, 4);
	fix_apply();
	ck_assert_int_eq(fx.t.nown, 1);
	memset(&fx.p, 0, sizeof(fx.p));
	group(&fx.p, RV_ROLE_PS, 1, 2, 1024);
	fix_apply();
	ck_assert(fx.eff.changed);
	ck_assert_int_eq(fx.t.nown, 0);
	ck_assert(rv_scaling_node_resource(&fx.t, RV_ROLE_PS, "ps-0").cpu == 2);
}
END_TEST

/* A PS role whose relaunch reloads its flash checkpoint (stateHandover):
 * the migration is relaunched as before and reported applied in full. */
START_TEST(test_migrate_with_handover_applied_in_full)
{
	fix_init(true);
	node(&fx.p.migrate[fx.p.nmigrate++], "ps-0", RV_ROLE_PS, 3);
	fix_apply();
	ck_assert_int_eq(fx.eff.nact, 1);
	ck_assert_int_eq(fx.eff.act[0].kind, RV_SCALING_MIGRATE);
	ck_assert_str_eq(fx.eff.act[0].node, "ps-0");
	ck_assert(fx.eff.act[0].resource.cpu == 3);
	ck_assert_str_eq(fx.eff.not_applied, "");
}
END_TEST

RV_TEST_MAIN_TCASE("plan_apply", "apply", 10, test_counts_clamped_and_named,
		   test_remove_replaces_migrate_relaunches,
		   test_migrate_with_handover_applied_in_full)
