-- 012_plan_not_applied: what a master did not apply of a plan it reported
-- applied.
--
-- A master applies a plan's counts and resources, replaces the stragglers it
-- names and relaunches the PS it migrates with their resources; what it
-- could not do (a count clamped by the replica spec, a node it does not run,
-- the PS data handover of a migration) comes with plan_applied as text.
-- '' is a plan applied in full (and every plan applied before this column).

ALTER TABLE scale_plans ADD COLUMN not_applied text NOT NULL DEFAULT '';
