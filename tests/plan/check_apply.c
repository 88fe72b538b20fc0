/*
 * check_apply.c: rv_plan_apply (plan/plan.c), the one function rover-master
 * and rover-sim apply a ScalePlan with: counts within the replica spec,
 * resources, a straggler in `remove` replaced, a hot PS in `migrate`
 * relaunched with its own resources (kept until its role's resources
 * change or its rank goes), and every part left undone named.
 */
#include <check.h>
#include <string.h>

#include "rover_plan.h"
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

START_TEST(test_counts_clamped_and_named)
{
	struct rv_job_spec spec;
	spec_init(&spec);
	struct rv_plan_target t;
	rv_plan_target_init(&t, &spec);
	static struct rv_scale_plan p;
	memset(&p, 0, sizeof(p));
	group(&p, RV_ROLE_WORKER, 9, 2, 2048);
	static struct rv_plan_effect eff;
	rv_plan_apply(&p, &spec, &t, &eff);
	ck_assert(eff.changed);
	ck_assert_int_eq(t.groups[RV_ROLE_WORKER].count, 4);
	ck_assert_int_eq(eff.asked[RV_ROLE_WORKER], 9);
	ck_assert_int_eq(eff.asked[RV_ROLE_PS], -1);
	ck_assert(t.groups[RV_ROLE_WORKER].resource.cpu == 2);
	ck_assert_int_eq(t.groups[RV_ROLE_PS].count, 2); /* not in the plan: kept */
	ck_assert_msg(strstr(eff.not_applied, "worker count 9: clamped to 4"), "%s",
		      eff.not_applied);
	ck_assert_int_eq(eff.nact, 0);
}
END_TEST

START_TEST(test_remove_replaces_migrate_relaunches)
{
	struct rv_job_spec spec;
	spec_init(&spec);
	struct rv_plan_target t;
	rv_plan_target_init(&t, &spec);
	static struct rv_scale_plan p;
	memset(&p, 0, sizeof(p));
	group(&p, RV_ROLE_WORKER, 3, 1, 1024);
	group(&p, RV_ROLE_PS, 2, 1, 1024);
	node(&p.remove[p.nremove++], "worker-2", RV_ROLE_WORKER, 0);
	node(&p.remove[p.nremove++], "worker-7", RV_ROLE_WORKER, 0);
	node(&p.launch[p.nlaunch++], "worker-2", RV_ROLE_WORKER, 1);
	node(&p.migrate[p.nmigrate++], "ps-1", RV_ROLE_PS, 3);
	static struct rv_plan_effect eff;
	rv_plan_apply(&p, &spec, &t, &eff);
	ck_assert_int_eq(eff.nact, 2);
	ck_assert_int_eq(eff.act[0].kind, RV_PLAN_REPLACE);
	ck_assert_str_eq(eff.act[0].node, "worker-2");
	ck_assert_int_eq(eff.act[0].rank, 2);
	ck_assert(eff.act[0].resource.cpu == 1);
	ck_assert_int_eq(eff.act[1].kind, RV_PLAN_MIGRATE);
	ck_assert_str_eq(eff.act[1].node, "ps-1");
	ck_assert_int_eq(eff.act[1].rank, 1);
	ck_assert(eff.act[1].resource.cpu == 3);
	ck_assert_int_eq(eff.act[1].resource.memory_mb, 1024); /* the role's */
	ck_assert_msg(strstr(eff.not_applied, "remove worker-7: the job runs no such node") &&
			      strstr(eff.not_applied, "migrate ps-1: the PS data handover"),
		      "%s", eff.not_applied);
	ck_assert(rv_plan_node_resource(&t, RV_ROLE_PS, "ps-1").cpu == 3);
	ck_assert(rv_plan_node_resource(&t, RV_ROLE_PS, "ps-0").cpu == 1);

	/* the same role resources again: ps-1 keeps its own, nothing relaunched */
	memset(&p, 0, sizeof(p));
	group(&p, RV_ROLE_PS, 2, 1, 1024);
	rv_plan_apply(&p, &spec, &t, &eff);
	ck_assert_int_eq(eff.nact, 0);
	ck_assert_str_eq(eff.not_applied, "");
	ck_assert(!eff.changed);
	ck_assert(rv_plan_node_resource(&t, RV_ROLE_PS, "ps-1").cpu == 3);
	/* one PS fewer: ps-1 is gone, and its own resources with it */
	group(&p, RV_ROLE_PS, 1, 1, 1024);
	rv_plan_apply(&p, &spec, &t, &eff);
	ck_assert_int_eq(t.nown, 0);
	/* new role resources drop what a node had of its own */
	node(&p.migrate[p.nmigrate++], "ps-0", RV_ROLE_PS, 4);
	rv_plan_apply(&p, &spec, &t, &eff);
	ck_assert_int_eq(t.nown, 1);
	memset(&p, 0, sizeof(p));
	group(&p, RV_ROLE_PS, 1, 2, 1024);
	rv_plan_apply(&p, &spec, &t, &eff);
	ck_assert(eff.changed);
	ck_assert_int_eq(t.nown, 0);
	ck_assert(rv_plan_node_resource(&t, RV_ROLE_PS, "ps-0").cpu == 2);
}
END_TEST

/* A PS role whose relaunch reloads its flash checkpoint (stateHandover):
 * the migration is relaunched as before and reported applied in full. */
START_TEST(test_migrate_with_handover_applied_in_full)
{
	struct rv_job_spec spec;
	spec_init(&spec);
	spec.replicas[RV_ROLE_PS].state_handover = true;
	struct rv_plan_target t;
	rv_plan_target_init(&t, &spec);
	static struct rv_scale_plan p;
	memset(&p, 0, sizeof(p));
	node(&p.migrate[p.nmigrate++], "ps-0", RV_ROLE_PS, 3);
	static struct rv_plan_effect eff;
	rv_plan_apply(&p, &spec, &t, &eff);
	ck_assert_int_eq(eff.nact, 1);
	ck_assert_int_eq(eff.act[0].kind, RV_PLAN_MIGRATE);
	ck_assert_str_eq(eff.act[0].node, "ps-0");
	ck_assert(eff.act[0].resource.cpu == 3);
	ck_assert_str_eq(eff.not_applied, "");
}
END_TEST

RV_TEST_MAIN_TCASE("plan_apply", "apply", 10, test_counts_clamped_and_named,
		   test_remove_replaces_migrate_relaunches,
		   test_migrate_with_handover_applied_in_full)
