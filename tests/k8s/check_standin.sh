#!/usr/bin/env bash
# Suite for the Kubernetes stand-in (k8s-standin): kubectl itself drives
# it, as it would a real API server.  Runs the whole list once per kubectl
# found: `command -v kubectl` and each path in KUBECTL_EXTRA (space
# separated; Debian's kubernetes-client is kubectl 1.20, a current one is
# 1.3x).  Prints one "ok"/"not ok" line per check and exits 1 if any
# failed.  No kubectl: a skip (a failure under CI=true, which installs
# kubernetes-client).  Needs a built tree ($B).  K8S_KEEP=1 keeps the temp
# folder (the stand-in's log, the pods' logs).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
# shellcheck source=tests/k8s/suite.sh
. "$top/tests/k8s/suite.sh"

TMP=$(mktemp -d /tmp/rover-k8s-test.XXXXXX)
PID=
cleanup() {
  if [ -n "$PID" ]; then
    kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null
  fi
  if [ -n "${K8S_KEEP:-}" ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The stand-in: two nodes of 2 CPUs and 2 GiB, a short history (32 changes of each kind) so that an
# old resource version expires within the suite.
"$STANDIN" --port-file "$TMP/port" --dir "$TMP/pods" --nodes 2 --node-cpu 2 \
  --node-memory 2Gi --history 32 >"$TMP/standin.log" 2>&1 &
PID=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
PORT=$(cat "$TMP/port" 2>/dev/null)
[ -n "$PORT" ] || {
  echo "not ok - the stand-in did not start"
  cat "$TMP/standin.log"
  exit 1
}
SERVER="http://127.0.0.1:$PORT"
cat >"$TMP/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: standin
  cluster: {server: "$SERVER"}
contexts:
- name: standin
  context: {cluster: standin, namespace: default, user: standin}
users:
- name: standin
  user: {}
current-context: standin
EOF
CGROUPS=yes
grep -q 'cgroups=none' "$TMP/standin.log" && CGROUPS=

# jqok JSON FILTER: FILTER is true of JSON (and JSON is not empty).
jqok() { [ -n "$1" ] && printf '%s' "$1" | jq -e "$2" >/dev/null 2>&1; }

# wait_for SECONDS COMMAND...: until COMMAND succeeds.
wait_for() {
  local n=$(($1 * 10))
  shift
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

# standin_checks KUBECTL VERSION: every check, with pod names of its own.
standin_checks() {
  local kc=$1 v=$2 p
  p=k$(echo "$v" | tr -cd '0-9' | cut -c1-6)
  # Every request with a timeout: a stand-in that never finishes a
  # deletion fails the check instead of hanging the suite.
  K=("$kc" --server "$SERVER" --namespace default --request-timeout=30s)
  KC=("$kc" --kubeconfig "$TMP/kubeconfig" --request-timeout=30s)
  local d="$TMP/$p"
  mkdir -p "$d"
  echo "# kubectl $v ($kc)"
  check_nodes "$v"
  check_lifecycle "$v" "$p" "$d"
  check_delete "$v" "$p" "$d"
  check_oom "$v" "$p" "$d"
  check_unschedulable "$v" "$p" "$d"
  check_patch "$v" "$p" "$d"
  check_owners "$v" "$p" "$d"
  check_expired "$v" "$p"
}

check_nodes() {
  if [ "$("${KC[@]}" get nodes 2>&1 | grep -c ' Ready ')" = 2 ] &&
    "${K[@]}" get --raw /version | grep -q gitVersion; then
    ok "kubectl $1: get nodes (kubeconfig) shows the 2 nodes Ready"
  else
    notok "kubectl $1: get nodes: $("${KC[@]}" get nodes 2>&1 | head -3)"
  fi
}

# pod_yaml NAME COMMAND [EXTRA-SPEC-LINES] [CONTAINER-LINES]: a pod that
# runs sh -c COMMAND, restartPolicy Never.
pod_yaml() {
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, labels: {suite: standin}}\n' "$1"
  printf 'spec:\n  restartPolicy: Never\n%s\n  containers:\n' "${3:-}"
  printf '  - name: main\n    image: busybox\n    command: ["sh", "-c", "%s"]\n%s\n' "$2" "${4:-}"
}

# apply, get -w from before the create until Completed, get -o json,
# -o wide, describe, logs (env from fieldRefs, $(VAR) expanded).
check_lifecycle() {
  local v=$1 name=$2-life d=$3
  pod_yaml "$name" 'echo hello from $(POD_NAME) in $POD_NS; sleep 1; echo bye' '' \
    '    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: POD_NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    resources: {requests: {cpu: 100m, memory: 32Mi}}' >"$d/life.yaml"
  timeout 20 "${K[@]}" get pods -w --field-selector "metadata.name=$name" >"$d/watch.out" 2>&1 &
  local wpid=$!
  sleep 1
  local out
  out=$("${KC[@]}" apply -f "$d/life.yaml" 2>&1)
  if [ "$out" = "pod/$name created" ]; then
    ok "kubectl $v: apply -f creates the pod"
  else
    notok "kubectl $v: apply -f: $out"
  fi
  wait_for 15 grep -q Completed "$d/watch.out"
  kill "$wpid" 2>/dev/null
  wait "$wpid" 2>/dev/null
  local seq
  seq=$(awk -v n="$name" '$1 == n { print $3 }' "$d/watch.out" | uniq | tr '\n' ' ')
  if [ "$seq" = "Pending Running Completed " ]; then
    ok "kubectl $v: get -w sees Pending, Running, Completed"
  else
    notok "kubectl $v: get -w saw: $seq ($(cat "$d/watch.out"))"
  fi
  local js
  js=$("${K[@]}" get pod "$name" -o json)
  if jqok "$js" '.status.phase == "Succeeded" and
      .status.containerStatuses[0].state.terminated.exitCode == 0 and
      .status.containerStatuses[0].state.terminated.reason == "Completed" and
      (.metadata.uid | length) == 36 and .metadata.generation == 1 and
      (.metadata.creationTimestamp | test("^[0-9-]+T[0-9:]+Z$")) and
      (.spec.nodeName | startswith("node-"))'; then
    ok "kubectl $v: get -o json: Succeeded, exit 0 Completed, uid, generation, node"
  else
    notok "kubectl $v: get -o json: $(echo "$js" | jq -c '{m: .metadata, s: .status}')"
  fi
  out=$("${K[@]}" get pod "$name" -o wide 2>&1)
  if echo "$out" | grep -qE "^$name +0/1 +Completed +0 .*127\.0\.0\.1 +node-"; then
    ok "kubectl $v: get -o wide shows the table with IP and NODE"
  else
    notok "kubectl $v: get -o wide: $out"
  fi
  out=$("${K[@]}" describe pod "$name" 2>&1)
  if echo "$out" | grep -qE '^Status: +Succeeded' && echo "$out" | grep -q 'Started container main' &&
    echo "$out" | grep -qE 'Reason: +Completed'; then
    ok "kubectl $v: describe shows the status, the container and the events"
  else
    notok "kubectl $v: describe: $out"
  fi
  out=$("${K[@]}" logs "$name" 2>&1)
  if [ "$out" = "hello from $name in default
bye" ]; then
    ok "kubectl $v: logs has the container's output (env from fieldRefs)"
  else
    notok "kubectl $v: logs: $out"
  fi
}

# delete with a grace period: a pod that exits on SIGTERM goes at once;
# one that ignores it is killed when its grace period is over.
check_delete() {
  local v=$1 d=$3 a=$2-term b=$2-stubborn
  pod_yaml "$a" "echo \$\$ > $d/$a.pid; trap 'echo term > $d/$a.term; exit 0' TERM; while :; do sleep 0.1; done" \
    '  terminationGracePeriodSeconds: 30' >"$d/a.yaml"
  pod_yaml "$b" "echo \$\$ > $d/$b.pid; trap '' TERM; while :; do sleep 0.1; done" \
    '  terminationGracePeriodSeconds: 30' >"$d/b.yaml"
  "${K[@]}" apply -f "$d/a.yaml" -f "$d/b.yaml" >/dev/null 2>&1
  wait_for 10 test -s "$d/$a.pid"
  wait_for 10 test -s "$d/$b.pid"
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("${K[@]}" delete pod "$a" --timeout=20s 2>&1)
  t1=$(date +%s.%N)
  if [ "$out" = "pod \"$a\" deleted" ] && [ -s "$d/$a.term" ] &&
    awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 10) }' &&
    ! "${K[@]}" get pod "$a" >/dev/null 2>&1; then
    ok "kubectl $v: delete sends SIGTERM; a pod that exits goes before its grace period"
  else
    notok "kubectl $v: delete $a: $out, term file: $(cat "$d/$a.term" 2>&1)"
  fi
  t0=$(date +%s.%N)
  out=$("${K[@]}" delete pod "$b" --grace-period=2 --timeout=10s 2>&1)
  t1=$(date +%s.%N)
  local pid
  pid=$(cat "$d/$b.pid")
  if [ "$out" = "pod \"$b\" deleted" ] && ! kill -0 "$pid" 2>/dev/null &&
    awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a >= 2 && b - a < 15) }'; then
    ok "kubectl $v: delete --grace-period=2 kills a pod ignoring SIGTERM after 2 s"
  else
    notok "kubectl $v: delete $b --grace-period=2: $out, $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s, pid $pid alive: $(kill -0 "$pid" 2>&1 && echo yes)"
  fi
}

# A pod over its memory limit ends OOMKilled (exit 137), as a kubelet reports it.
check_oom() {
  local v=$1 name=$2-oom d=$3
  if [ -z "$CGROUPS" ]; then
    echo "SKIP: OOMKilled: the stand-in has no memory cgroups here ($(grep -o 'why=.*' "$TMP/standin.log"))"
    return
  fi
  pod_yaml "$name" 'echo start; tail /dev/zero' '' \
    '    resources: {limits: {memory: 32Mi}}' >"$d/oom.yaml"
  "${K[@]}" apply -f "$d/oom.yaml" >/dev/null 2>&1
  wait_for 20 sh -c "\"\${0}\" --server $SERVER get pod $name | grep -q OOMKilled" "$kc"
  local js
  js=$("${K[@]}" get pod "$name" -o json)
  if jqok "$js" '.status.phase == "Failed" and
      .status.containerStatuses[0].state.terminated.reason == "OOMKilled" and
      .status.containerStatuses[0].state.terminated.exitCode == 137' &&
    "${K[@]}" get pod "$name" | grep -qE "^$name +0/1 +OOMKilled"; then
    ok "kubectl $v: a pod over its memory limit is OOMKilled (exit 137, phase Failed)"
  else
    notok "kubectl $v: OOM: $(echo "$js" | jq -c .status)"
  fi
}

# Nothing fits: Pending with PodScheduled=False Unschedulable and an event;
# a pod for another scheduler stays Pending untouched.
check_unschedulable() {
  local v=$1 name=$2-huge other=$2-other d=$3
  pod_yaml "$name" 'sleep 100' '' '    resources: {requests: {memory: 100Gi}}' >"$d/huge.yaml"
  pod_yaml "$other" 'sleep 100' '  schedulerName: volcano' >"$d/other.yaml"
  "${K[@]}" apply -f "$d/huge.yaml" -f "$d/other.yaml" >/dev/null 2>&1
  wait_for 10 sh -c "\"\${0}\" --server $SERVER describe pod $name | grep -q FailedScheduling" "$kc"
  local js out
  js=$("${K[@]}" get pod "$name" -o json)
  out=$("${K[@]}" describe pod "$name" 2>&1)
  if jqok "$js" '.status.phase == "Pending" and (.spec.nodeName // "") == "" and
      (.status.conditions[] | select(.type == "PodScheduled") |
       .status == "False" and .reason == "Unschedulable" and
       (.message | test("0/2 nodes are available: 2 Insufficient memory")))' &&
    echo "$out" | grep -qE 'Warning +FailedScheduling .*Insufficient memory'; then
    ok "kubectl $v: an unschedulable pod is Pending, Unschedulable, with the reason"
  else
    notok "kubectl $v: unschedulable: $(echo "$js" | jq -c .status) $out"
  fi
  js=$("${K[@]}" get pod "$other" -o json)
  if jqok "$js" '.status.phase == "Pending" and (.spec.nodeName // "") == "" and
      ((.status.conditions // []) | length) == 0'; then
    ok "kubectl $v: a pod for another schedulerName stays Pending, unplaced"
  else
    notok "kubectl $v: schedulerName volcano: $(echo "$js" | jq -c '{spec: .spec, status: .status}')"
  fi
  "${K[@]}" delete pod "$name" "$other" --wait=false >/dev/null 2>&1
}

# label, annotate (strategic merge patch), patch --type merge and json,
# selectors, a stale update refused with 409.
check_patch() {
  local v=$1 name=$2-patch d=$3 out
  pod_yaml "$name" 'sleep 300' >"$d/patch.yaml"
  "${K[@]}" apply -f "$d/patch.yaml" >/dev/null 2>&1
  "${K[@]}" label pod "$name" team=ml >/dev/null 2>&1
  "${K[@]}" annotate pod "$name" rover.dev/rank=3 >/dev/null 2>&1
  "${K[@]}" patch pod "$name" --type merge -p '{"metadata":{"labels":{"tier":"gold"}}}' >/dev/null 2>&1
  "${K[@]}" patch pod "$name" --type json -p '[{"op":"add","path":"/metadata/labels/zone","value":"a"}]' >/dev/null 2>&1
  out=$("${K[@]}" get pods -l 'team=ml,tier in (gold,silver),zone,!absent' -o name 2>&1)
  if [ "$out" = "pod/$name" ] &&
    [ "$("${K[@]}" get pod "$name" -o jsonpath='{.metadata.annotations.rover\.dev/rank}')" = 3 ] &&
    [ -z "$("${K[@]}" get pods -l team=other -o name 2>&1)" ]; then
    ok "kubectl $v: label, annotate, patch (merge, json) and label selectors"
  else
    notok "kubectl $v: patch: selected '$out', $("${K[@]}" get pod "$name" -o json | jq -c .metadata)"
  fi
  out=$("${K[@]}" get pods --field-selector "status.phase=Running,metadata.name=$name" -o name 2>&1)
  if [ "$out" = "pod/$name" ]; then
    ok "kubectl $v: field selectors on status.phase and metadata.name"
  else
    notok "kubectl $v: field selector: '$out'"
  fi
  "${K[@]}" get pod "$name" -o json | jq '.metadata.resourceVersion = "1" | .metadata.labels.x = "y"' >"$d/stale.json"
  out=$("${K[@]}" replace -f "$d/stale.json" 2>&1)
  if echo "$out" | grep -q 'the object has been modified'; then
    ok "kubectl $v: replace with a stale resourceVersion is a Conflict"
  else
    notok "kubectl $v: replace stale: $out"
  fi
  "${K[@]}" delete pod "$name" --grace-period=0 --force >/dev/null 2>&1
}

# ownerReferences: deleting the owner deletes its dependents.
check_owners() {
  local v=$1 owner=$2-owner child=$2-child d=$3 uid out
  pod_yaml "$owner" 'sleep 300' >"$d/owner.yaml"
  "${K[@]}" apply -f "$d/owner.yaml" >/dev/null 2>&1
  uid=$("${K[@]}" get pod "$owner" -o jsonpath='{.metadata.uid}')
  pod_yaml "$child" 'sleep 300' | sed "s/^metadata: .*/metadata: {name: $child, ownerReferences: [{apiVersion: v1, kind: Pod, name: $owner, uid: $uid}]}/" >"$d/child.yaml"
  "${K[@]}" apply -f "$d/child.yaml" >/dev/null 2>&1
  local had=
  wait_for 10 sh -c "\"\${0}\" --server $SERVER get pod $child | grep -q Running" "$kc" && had=yes
  "${K[@]}" delete pod "$owner" --grace-period=1 --timeout=20s >/dev/null 2>&1
  wait_for 15 sh -c "! \"\${0}\" --server $SERVER get pod $child" "$kc"
  out=$("${K[@]}" get pod "$owner" "$child" 2>&1)
  if [ -n "$had" ] && echo "$out" | grep -q "\"$owner\" not found" &&
    echo "$out" | grep -q "\"$child\" not found"; then
    ok "kubectl $v: deleting the owner deletes the pod that names it in ownerReferences"
  else
    notok "kubectl $v: cascade: $out"
  fi
}

# A watch from a version the bounded history no longer holds: one ERROR
# event with a Status of code 410, reason Expired.
check_expired() {
  local v=$1 out
  out=$(timeout 10 "${K[@]}" get --raw '/api/v1/namespaces/default/pods?watch=true&resourceVersion=1' 2>&1)
  if jqok "$out" 'select(.type == "ERROR") | .object |
      .kind == "Status" and .code == 410 and .reason == "Expired"'; then
    ok "kubectl $v: a watch from an expired resourceVersion gets 410 Expired"
  else
    notok "kubectl $v: watch from resourceVersion 1: $(echo "$out" | head -c 300)"
  fi
}

for kc in "${kubectls[@]}"; do
  ver=$("$kc" version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -1)
  standin_checks "$kc" "${ver:-unknown}"
done
# What clients of the API (not kubectl's commands) rely on, once, with
# the first kubectl and curl.
kc=${kubectls[0]}
K=("$kc" --server "$SERVER" --namespace default --request-timeout=30s)
mkdir -p "$TMP/x"
. "$top/tests/k8s/faults.sh"
. "$top/tests/k8s/custom.sh"
exit $failed
